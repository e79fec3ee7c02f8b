"""How far pa-synth's orderings agree with the papers' on the same fixed transforms.

pa-synth stands in for real videos only where it orders the fixed transforms (downsampling,
blackening or blurring the person's box) as the papers' real-data experiments do. For each
pa-synth protocol with a counterpart in SPAct's Table 1 this measures, over the methods both
have: the Spearman correlation of action top-1 and of worst-case privacy cMAP with the reported
numbers, what 4x downsampling costs the action score, and whether coarser downsampling costs
more. The paper's own agreement between its two settings is given beside it: the bar pa-synth
can be expected to reach. Targets are fixed below and reported as met or missed.

Spearman's rho is the Pearson correlation of the two columns' ranks, tied values sharing the
average of the ranks they span (`pabench.leaderboard.agreement.spearman`: pandas' ranking, as
`scipy.stats.spearmanr` does); it is undefined (None) below `agreement.MIN_SHARED` methods or where
a column is constant.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from pabench.errors import PabenchError
from pabench.leaderboard.agreement import spearman
from pabench.leaderboard.reported import CSV_NAME, ReportedGroup, load_reported
from pabench.leaderboard.tables import Table, build_tables, load_records

BENCHMARK = "pa-synth"
SOURCE = "SPAct (Dave et al., CVPR 2022)"
SOURCE_TABLE = "Table 1"
SETTINGS: dict[str, str] = {
    "known": "cross-dataset train, same-dataset test",  # HMDB51 -> PA-HMDB51, VISPR1 -> PA-HMDB51
    "cross-dataset": "cross-dataset",  # UCF101, VISPR1
}
"""pa-synth protocol -> the `setting` of SPAct's Table 1 rows it is calibrated against."""
METHODS: dict[str, str] = {
    "Raw data": "identity",
    "Downsample-2x": "downsample-2x",
    "Downsample-4x": "downsample-4x",
    "Obf-Blackening": "box-black-body",
    "Obf-StrongBlur": "box-blur-body-strong",
    "Obf-WeakBlur": "box-blur-body-weak",
}
"""Reported method -> the pa-synth baseline applying the same fixed transform."""
RAW, COST_METHOD = "Raw data", "Downsample-4x"
DOWNSAMPLING = ("downsample-2x", "downsample-4x", "downsample-8x")
"""Coarser downsampling keeps less motion: action top-1 must fall in this order."""
TARGET_ACTION_RHO = 0.8
TARGET_PRIVACY_RHO = 0.75
TARGET_COST = 15.0
"""Top-1 points raw data must lead downsample-4x by, as on real videos (SPAct: 17.8, 22.7)."""
MEANING = ("How far pa-synth orders the papers' fixed transforms as the papers do on real "
           "videos: Spearman's rho of action top-1 and of worst-case privacy cMAP against "
           f"{SOURCE}, {SOURCE_TABLE}, beside the paper's own agreement between its two settings.")


@dataclass(frozen=True)
class Check:
    """One measured value against its target; `passed` is None where it cannot be measured.
    `shown` is the value as the command and the site print it."""

    name: str
    value: float | bool | None
    target: str
    passed: bool | None
    shown: str

    @property
    def verdict(self) -> str:
        return {True: "pass", False: "miss", None: "n/a"}[self.passed]


def shown(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


@dataclass
class Calibration:
    """One pa-synth table (preset, protocol, version) against its paper setting."""

    preset: str
    protocol: str
    version: int
    setting: str
    datasets: str  # the paper setting's "action dataset / privacy dataset"
    matched: list[tuple[str, str]]  # (reported method, pa-synth entry) present on both sides
    missing: list[tuple[str, str]]  # mapped pairs that one side lacks
    action_rho: float | None
    privacy_rho: float | None
    paper_action_rho: float | None  # the paper's two settings against each other
    paper_privacy_rho: float | None
    cost: float | None  # raw top-1 minus downsample-4x top-1, points
    paper_cost: float | None
    downsampling: list[float | None] = field(default_factory=list)  # DOWNSAMPLING's top-1

    @property
    def n(self) -> int:
        return len(self.matched)

    @property
    def order_holds(self) -> bool | None:
        """Whether 2x > 4x > 8x on action top-1 (None when one of them has no record)."""
        if None in self.downsampling or len(self.downsampling) != len(DOWNSAMPLING):
            return None
        return all(a > b for a, b in zip(self.downsampling, self.downsampling[1:], strict=False))

    @property
    def checks(self) -> list[Check]:
        def at_least(name: str, v: float | None, target: float, digits: int = 2) -> Check:
            passed = None if v is None else v >= target
            return Check(name, v, f">= {target:g}", passed, shown(v, digits))

        order = self.order_holds
        return [at_least("action rho", self.action_rho, TARGET_ACTION_RHO),
                at_least("privacy rho", self.privacy_rho, TARGET_PRIVACY_RHO),
                at_least("downsample-4x cost", self.cost, TARGET_COST, digits=1),
                Check("2x > 4x > 8x", order, "holds", order,
                      " / ".join(shown(v, 1) for v in self.downsampling))]

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "benchmark": BENCHMARK, "source": SOURCE,
                "source_table": SOURCE_TABLE, "n": self.n, "order_holds": self.order_holds,
                "checks": [{**asdict(c), "verdict": c.verdict} for c in self.checks]}


def _rho(a: dict[str, float], b: dict[str, float]) -> float | None:
    return spearman({"a": a, "b": b})[0][0][1]


def _paper(groups: list[ReportedGroup]) -> dict[str, ReportedGroup]:
    """SETTINGS' paper rows, by setting."""
    wanted = set(SETTINGS.values())
    return {g.setting: g for g in groups
            if g.source == SOURCE and g.table == SOURCE_TABLE and g.setting in wanted}


def _methods(group: ReportedGroup) -> dict[str, dict[str, float]]:
    """The group's mapped rows that carry both a top-1 action score and a privacy cMAP."""
    return {str(r["method"]): {"action": float(r["action"]),  # type: ignore[arg-type]
                               "privacy_cmap": float(r["privacy_cmap"])}  # type: ignore[arg-type]
            for r in group.rows if r["method"] in METHODS and r["action_metric"] == "top1"
            and r["action"] is not None and r["privacy_cmap"] is not None}


def _calibrate(table: Table, group: ReportedGroup,
               paper: dict[str, ReportedGroup]) -> Calibration:
    reported = _methods(group)
    ours = {e.name: e.m for e in table.entries}
    pairs = list(METHODS.items())
    matched = [(r, o) for r, o in pairs if r in reported and o in ours]
    missing = [p for p in pairs if p not in matched]

    def column(key: str) -> tuple[dict[str, float], dict[str, float]]:
        synth = {r: float(getattr(ours[o], key)) for r, o in matched}
        return synth, {r: reported[r][key] for r, _ in matched}

    settings = [_methods(paper[s]) for s in SETTINGS.values() if s in paper]
    both = [r for r, _ in matched if all(r in s for s in settings)]

    def agreement(key: str) -> float | None:
        if len(settings) != 2:
            return None
        return _rho(*({r: s[r][key] for r in both} for s in settings))

    def cost(top1: dict[str, float]) -> float | None:
        return top1[RAW] - top1[COST_METHOD] if {RAW, COST_METHOD} <= top1.keys() else None

    synth_top1, paper_top1 = column("action")
    return Calibration(
        preset=table.preset, protocol=table.protocol, version=table.version,
        setting=group.setting, datasets=f"{group.action_dataset} / {group.privacy_dataset}",
        matched=matched, missing=missing,
        action_rho=_rho(synth_top1, paper_top1), privacy_rho=_rho(*column("privacy_cmap")),
        paper_action_rho=agreement("action"), paper_privacy_rho=agreement("privacy_cmap"),
        cost=cost(synth_top1), paper_cost=cost(paper_top1),
        downsampling=[float(ours[d].action) if d in ours else None for d in DOWNSAMPLING],
    )


def calibrate(tables: list[Table], groups: list[ReportedGroup],
              version: int | None = None) -> list[Calibration]:
    """One calibration per pa-synth table of a protocol in SETTINGS whose paper setting is in
    `groups`: tables of each protocol's current version, or of `version` when given."""
    paper = _paper(groups)
    return [_calibrate(t, paper[SETTINGS[t.protocol]], paper) for t in tables
            if t.benchmark == BENCHMARK and t.protocol in SETTINGS
            and SETTINGS[t.protocol] in paper
            and (t.current if version is None else t.version == version)]


def calibration(results: Path, reported: Path, version: int | None = None) -> list[Calibration]:
    """`calibrate` on the records in `results` and the paper rows vendored in `reported`; a
    side without the rows it needs is a one-line error naming it."""
    groups = load_reported(Path(reported))
    missing = set(SETTINGS.values()) - _paper(groups).keys()
    if missing:
        raise PabenchError(f"{Path(reported) / CSV_NAME}: no rows of {SOURCE}, {SOURCE_TABLE} in "
                           f"setting(s) {', '.join(sorted(missing))}")
    found = calibrate(build_tables(load_records(Path(results))), groups, version)
    if not found:
        which = "their current versions" if version is None else f"version {version}"
        raise PabenchError(f"{results}: no {BENCHMARK} records of {', '.join(SETTINGS)} at "
                           f"{which}")
    return found
