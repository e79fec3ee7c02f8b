"""Generations: the sets of validity rules a protocol version follows, newest last.

Each generation adds rules to the one before; a version belongs to the newest generation whose
rules, and all earlier ones, its spec meets (`ProtocolSpec.generation`). The number is derived
from the spec rather than declared beside it: it cannot disagree with the fields it names, and
released versions (pa-synth v6 among them) keep the JSON their records were written with.
Every ranked protocol's current version belongs to `CURRENT_GENERATION`
(tests/test_protocol_v2.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pabench.models import ModelSpec
    from pabench.protocols.spec import ProtocolSpec


def _model(name: str) -> ModelSpec:
    """The model zoo is imported on first use: it loads torch, which listing protocols need
    not pay for until a generation is asked."""
    from pabench.models import MODELS

    return MODELS.get(name)


def _trained_and_checked(p: ProtocolSpec) -> bool:
    """Seeds, a cosine schedule, a strength floor, and a consistency check wherever the
    attackers' training and test clips come from one dataset's anonymized splits (a check
    across two datasets would only tell the datasets apart)."""
    same_source = (p.attacker_training == "anonymized"
                   and p.privacy_train.dataset == p.privacy_test.dataset)
    return (len(p.seeds) >= 3 and p.schedule.lr_decay == "cosine"
            and p.strength_floor is not None and (p.consistency_check or not same_source))


def _standardized_with_probe(p: ProtocolSpec) -> bool:
    return p.standardize and any(_model(a).probe for a in p.attackers)


def _frame_standardized(p: ProtocolSpec) -> bool:
    return any(_model(a).frame_standardized for a in p.attackers)


def _best_validation(p: ProtocolSpec) -> bool:
    s = p.schedule_for("attributes")
    return s.stop_on == "score-last" and s.min_epochs >= s.max_epochs


@dataclass(frozen=True)
class Generation:
    number: int
    since: str  # the pa-synth version that introduced the rules
    rules: str
    met: Callable[[ProtocolSpec], bool]


GENERATIONS: tuple[Generation, ...] = (
    Generation(1, "v1", "each model trains once at a constant learning rate, stopped on its "
               "validation score", lambda p: True),
    Generation(2, "v2", "three seeds; a cosine schedule keeping the epoch of lowest validation "
               "loss; attackers far below the strongest flagged weak; a consistency check where "
               "the attackers' training and test clips come from one dataset",
               _trained_and_checked),
    Generation(3, "v4", "every model reads its input less its training clips' mean image, each "
               "channel scaled by the spread left; a linear probe among the attackers",
               _standardized_with_probe),
    Generation(4, "v5", "an attacker that reads each frame standardized by its own mean and "
               "spread", _frame_standardized),
    Generation(5, "v6", "attackers train their whole budget and keep the epoch of highest "
               "validation score", _best_validation),
)
CURRENT_GENERATION = GENERATIONS[-1].number


def generation_of(p: ProtocolSpec) -> int:
    """The newest generation whose rules, and every earlier generation's, `p` meets."""
    number = 0
    for g in GENERATIONS:
        if not g.met(p):
            break
        number = g.number
    return number
