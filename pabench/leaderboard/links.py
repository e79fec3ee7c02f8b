"""Each entry's paper and code, for the site's tables: the papers pabench's baselines reproduce.

A submission names its paper in its sidecar (`paper_url`). pabench's own baselines link the
paper they follow, and the authors' code where that paper's lineage published it; otherwise the
code is pabench's implementation, which the entry page's command re-runs. Links are arXiv
abstract pages of the papers in `leaderboard/reported/citations.json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pabench.leaderboard.tables import Entry

VITA_PAPER = "https://arxiv.org/abs/1906.05675"
"""Wu et al., TPAMI: the adversarial framework (VITA, its GRL and K-beam variants), and the
downsampling rates and {box, seg} x {black, blur} x {face, body} grid of the fixed baselines."""
VITA_CODE = "https://github.com/VITA-Group/Privacy-AdversarialLearning"
"""VITA's official code, as SPAct's supplement (section C.6) names it."""
SPACT_PAPER = "https://arxiv.org/abs/2203.15205"
PENALTY_PAPER = "https://arxiv.org/abs/2504.14301"
"""Aslam & Nasrollahi, penalty-driven anonymization (pabench's `penalty`)."""

_LEARNED = {"spact": SPACT_PAPER, "penalty": PENALTY_PAPER, "vita": VITA_PAPER,
            "vita-grl": VITA_PAPER, "vita-kbeam": VITA_PAPER}
_FIXED_PREFIXES = ("downsample-", "box-", "seg-")  # the TPAMI paper's fixed transforms


@dataclass(frozen=True)
class Links:
    paper: str | None  # None: no paper (a control, or one whose address is not known here)
    code: str | None  # the authors' code; None: the entry's own page (pabench's, or the file)


def baseline_paper(name: str) -> str | None:
    """The paper pabench's baseline `name` follows."""
    if name in _LEARNED:
        return _LEARNED[name]
    return VITA_PAPER if name.startswith(_FIXED_PREFIXES) else None


def entry_links(entry: Entry) -> Links:
    """The submission's own paper_url first; pabench's baselines fall back on their paper."""
    s = entry.record.submission
    own = s.meta.paper_url
    if s.format != "baseline":
        return Links(own, None)
    paper = own or baseline_paper(s.name)
    return Links(paper, VITA_CODE if paper == VITA_PAPER and s.name.startswith("vita") else None)
