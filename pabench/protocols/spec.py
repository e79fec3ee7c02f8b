"""What a protocol version is: which sets, clip spec, target/attacker models, schedule, seeds.

Anything that moves numbers (a dataset role, the clip spec, a model, the schedule, the
augmentation) bumps `version`; records of different versions are never ranked together. The
versions themselves are literal data in `pabench.protocols.synth` and `pabench.protocols.real`.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pabench.protocols.generation import generation_of


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _unset(value: object) -> bool:
    """Fields added after a version was released are left out of its JSON while unset, so every
    released spec dumps as it did (tests/fixtures/protocols.json)."""
    return value is None or value is False or value == ()


class DataRef(_Frozen):
    """A split of a built dataset. `labels` names one of its label groups (`extra_labels` in
    its meta, e.g. P-HVU's "objects") whose tags become multi-label targets; None = the
    dataset's own action and attribute columns. `frame_labels`: each video is scored as its
    clip-length windows, each labelled by the per-frame labels of the frames it holds
    (PA-HMDB51's, `ClipSet.frame_windows`), rather than by its video-level labels."""

    dataset: str
    split: str
    labels: str | None = None
    frame_labels: bool = Field(default=False, exclude_if=_unset)

    @property
    def view(self) -> str:
        """The dataset as labelled here ("p-hvu:objects"): the name declarations of training
        data use, so novel protocols can tell one label group of a dataset from another."""
        return f"{self.dataset}:{self.labels}" if self.labels else self.dataset

    def __str__(self) -> str:
        return f"{self.view}/{self.split}" + (" (per-frame labels)" if self.frame_labels else "")

# real videos are stored resampled to 4 clip lengths: evaluation takes 10 clips from them and
# training a random window (decoded once, shared by both)
REAL_FRAMES_PER_CLIP = 4


class ClipSpec(_Frozen):
    """Clip shape the anonymizer sees. None = the benchmark preset's native frames/size."""

    frames: int | None = None
    size: int | None = None
    test_clips: int = 10  # equidistant clips per test video, softmax-averaged


class Schedule(_Frozen):
    """Targets and attackers train to convergence: early stopping on a held-out split.

    v1 stops on the validation score with a fixed patience at a constant LR. v2 decays the LR
    (cosine over `max_epochs`), keeps the epoch of lowest validation *loss* (less noisy than a
    score on a few hundred clips), waits `patience_fraction` of the budget for a new best, and
    retrains a run whose best epoch falls in the first tenth of the budget at each of
    `retry_lrs`, keeping the attempt of lowest validation loss (every attempt is recorded).
    v6's attackers keep the epoch, and attempt, of highest validation score instead (the
    latest of equal scores), over their whole budget
    (`ProtocolSpec.attacker_schedule`)."""

    max_epochs: int = 40
    patience: int = 4
    min_epochs: int = 4
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 1e-4
    val_fraction: float = 0.15
    lr_decay: Literal["none", "cosine"] = "none"
    stop_on: Literal["score", "loss", "score-last"] = "score"
    patience_fraction: float = 0.0
    retry_lrs: tuple[float, ...] = ()

    @property
    def window(self) -> int:
        """Epochs without a new best before stopping: scales with the budget in v2."""
        return max(self.patience, math.ceil(self.patience_fraction * self.max_epochs))


class Reproduces(_Frozen):
    """The paper setting a reproduction protocol re-runs: `paper` and `table` as the vendored
    reported results name them (`pabench.leaderboard.reported`), `action` and `privacy` the
    dataset columns of its rows there ("" where the paper reports that side elsewhere)."""

    paper: str
    table: str
    setting: str
    action: str = ""
    privacy: str = ""


class ModelWeights(_Frozen):
    """The initial weights of each model a protocol trains: a torchvision weights enum member
    ("R3D_18_Weights.KINETICS400_V1"), loaded offline (`pabench.models.weights`), or None for a
    random initialisation."""

    target: str | None = None
    attackers: dict[str, str | None] = Field(default_factory=dict)


class ProtocolSpec(_Frozen):
    id: str
    version: int
    benchmark: str  # "pa-synth" or "real"
    title: str
    description: str
    action_train: DataRef
    action_test: DataRef
    privacy_train: DataRef
    privacy_test: DataRef
    clip: ClipSpec = ClipSpec()
    target: str
    attackers: tuple[str, ...]
    attacker_training: Literal["anonymized", "raw"] = "anonymized"
    augment: tuple[str, ...] = ("shift",)  # applied after anonymization
    schedule: Schedule = Schedule()
    seeds: tuple[int, ...] = (0,)
    novel: bool = False  # the submission's declared training data must be disjoint
    # which test sides `novel` covers: the P-HVU scenes -> objects protocol keeps known actions
    novel_sides: tuple[Literal["action", "privacy"], ...] = ("action", "privacy")
    paper_setting: str = ""
    metrics: tuple[str, ...] = Field(
        default=("action", "privacy_cmap", "privacy_f1", "action_drop", "privacy_drop")
    )
    # v2: a diagnostic protocol is shown apart from the ranked tables; a reproduction re-runs a
    # paper's setting (`reproduces`) and is never ranked
    role: Literal["ranked", "diagnostic", "reproduction"] = "ranked"
    data_version: int = 1  # pa-synth generator version its datasets are rendered with
    # an attacker whose raw-data cMAP is more than this many points below the strongest's is
    # flagged as not an attacker (None: no floor)
    strength_floor: float | None = None
    # train a classifier to tell anonymized train clips from test clips; must be at chance
    consistency_check: bool = False
    # v4: every target and attacker sees its input less its own training clips' mean image,
    # each channel scaled by the spread left (`pabench.training.Standardized`), and the shift
    # augmentation moves only the departure from that image: attackers fed a fixed pattern
    # that varies by a grey level stayed at chance while a linear probe read the attributes
    standardize: bool = False
    # the version whose trained models this one shares (None: its own): a version that only
    # adds attackers trains nothing the one it extends has not already trained
    models_of: int | None = None
    # v6: the attackers' schedule where it differs from the target's (None: the same)
    attacker_schedule: Schedule | None = None
    # the models' initial weights (None: every model starts from a random initialisation)
    weights: ModelWeights | None = Field(default=None, exclude_if=_unset)
    # a reproduction's paper setting and, one sentence each, every way it cannot match it
    reproduces: Reproduces | None = Field(default=None, exclude_if=_unset)
    approximations: tuple[str, ...] = Field(default=(), exclude_if=_unset)
    # how records are scored: 1 resamples n seeds out of n inside each bootstrap draw; 2
    # stretches each draw's seed-resampled mean from the draw's all-seed mean by sqrt(n/(n-1)),
    # so intervals carry the seeds' full variance, and stores each entry's per-video outcomes
    # beside its record for paired comparisons of neighbours (`pabench.leaderboard.paired`)
    scoring: Literal[1, 2] = Field(default=1, exclude_if=lambda v: v == 1)

    @model_validator(mode="after")
    def _reproduction(self) -> ProtocolSpec:
        """A reproduction says what it reproduces, and weights name exactly the attackers."""
        if (self.role == "reproduction") != (self.reproduces is not None):
            raise ValueError(f"{self.id}: a reproduction protocol, and only one, names the "
                             "paper setting it reproduces")
        if self.weights is not None and set(self.weights.attackers) != set(self.attackers):
            raise ValueError(f"{self.id}: weights name attackers {sorted(self.weights.attackers)}"
                             f", the protocol has {sorted(self.attackers)}")
        return self

    @property
    def generation(self) -> int:
        """The set of validity rules this version follows (`pabench.protocols.generation`),
        derived from its fields."""
        return generation_of(self)

    @property
    def models_version(self) -> int:
        """The protocol version in every fit cache key (`pabench.evaluation.fit.plan`)."""
        return self.models_of or self.version

    def weights_for(self, model: str, target: Literal["action", "attributes"]) -> str | None:
        """The initial weights of the target (`action`) or of attacker `model`."""
        if self.weights is None:
            return None
        return self.weights.target if target == "action" else self.weights.attackers.get(model)

    def schedule_for(self, target: Literal["action", "attributes"]) -> Schedule:
        """How the target (`action`) or an attacker (`attributes`) trains."""
        if target == "attributes" and self.attacker_schedule is not None:
            return self.attacker_schedule
        return self.schedule


class Release(_Frozen):
    """One version of a protocol: its full spec and, one sentence each, what changed for a user
    since the version before and why (the first version says what it set up)."""

    spec: ProtocolSpec
    changes: tuple[str, ...] = Field(min_length=1)


class ProtocolVersions(Enum):
    """A protocol's versions, as torchvision's weights enums: members `V<n>` oldest first, each a
    `Release`, and `DEFAULT` the current one (an alias). A version above `DEFAULT` is being made
    entry by entry (the newest) or was superseded before it became current."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self.spec.id}@{self.spec.version}>"

    @property
    def spec(self) -> ProtocolSpec:
        return self.value.spec

    @property
    def changes(self) -> tuple[str, ...]:
        return self.value.changes
