"""One table's records as the rows and convergence evidence a README or a review quotes.

Numbers written about the leaderboard must come from a command anyone can rerun on the
committed records, not from a private script: `pabench leaderboard show` prints these.
"""

from __future__ import annotations

from dataclasses import dataclass

from pabench.errors import PabenchError
from pabench.leaderboard.tables import Entry, Table
from pabench.protocols import get_protocol
from pabench.records import Curve

LATE_GAIN = 1.0
"""Points of best validation score a run may still gain in its last fifth of epochs before it
counts as still learning when it stopped."""


def late_gain(curve: Curve) -> float:
    """How far the best validation score rose in the last fifth of the run's epochs (at least
    the last one): a converged run gains about nothing there."""
    v = curve.val_score
    head = len(v) - max(1, len(v) // 5)
    return max(v) - max(v[:head]) if head >= 1 else 0.0


@dataclass(frozen=True)
class LateRun:
    """A chosen attacker run and what it gained late."""

    entry: str
    arch: str
    seed: int
    best_epoch: int
    epochs: int
    gain: float


@dataclass(frozen=True)
class Convergence:
    """Over a table's chosen attacker runs with curves: how many, how many gained more than
    `LATE_GAIN` late, and the one that gained most."""

    runs: int
    late: int
    most: LateRun | None

    @property
    def text(self) -> str:
        head = (f"{self.runs} chosen attacker runs; {self.late} gained more than {LATE_GAIN:g} "
                "point of best validation cMAP in their last fifth of epochs")
        m = self.most
        if m is None:
            return head
        return (f"{head}; most {m.gain:.1f} ({m.entry}, {m.arch} seed {m.seed}, best epoch "
                f"{m.best_epoch}, stopped at {m.epochs})")


def convergence(entries: list[Entry]) -> Convergence:
    runs = [LateRun(e.name, a.arch, c.seed, c.best_epoch, len(c.val_score), late_gain(c))
            for e in entries for a in e.record.attackers for c in a.curves
            if c.chosen and c.val_score]
    return Convergence(len(runs), sum(r.gain > LATE_GAIN for r in runs),
                       max(runs, key=lambda r: r.gain, default=None))


def _ci(value: float, ci: tuple[float, float]) -> str:
    return f"{value:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"


def _diff(value: float, ci: tuple[float, float]) -> str:
    return f"{value:+.1f} [{ci[0]:+.1f}, {ci[1]:+.1f}]"


def summary_rows(table: Table, against: Table | None = None) -> list[dict[str, str]]:
    """One row per entry, best privacy first, the raw reference and the controls after the
    ranked entries (as on the site): in a ranked table the privacy rank or tie group (none for
    the reference, the controls and unranked records), action, worst-case cMAP with its CI,
    where ranks come from paired tests each entry less the one above it (privacy and action,
    with their paired intervals), the same entry's cMAP in `against` when given, the worst
    attacker's cMAP per seed, each attacker's cMAP (in the first record's attacker order),
    wall time and the pabench commit that made it; a learned baseline's record of an older
    recipe is marked beside its name."""
    other = {e.name: e.m for e in against.entries} if against else {}
    archs = list(dict.fromkeys(a.arch for e in table.entries for a in e.record.attackers))
    paired = any(e.vs_previous for e in table.entries)
    rows = []
    for e in sorted(table.entries, key=lambda e: not e.competes):  # stable: ranks kept
        m, rec = e.m, e.record
        row = {"rank": e.rank_text} if table.listing == "ranked" else {}
        older = " (older recipe)" if e.recipe_changes else ""  # as the site marks it
        row |= {"entry": e.name + older, "action": f"{m.action:.1f}",
                "worst-case cMAP": _ci(m.privacy_cmap, m.privacy_cmap_ci)}
        if paired:
            g = e.vs_previous
            row |= {"privacy vs above": _diff(g.privacy_cmap, g.privacy_cmap_ci) if g else "",
                    "action vs above": _diff(g.action, g.action_ci) if g else ""}
        if against:
            was = other.get(e.name)
            row[f"{against.protocol}@{against.version}"] = (
                _ci(was.privacy_cmap, was.privacy_cmap_ci) if was else "")
        n = min((len(a.cmap_per_seed) for a in rec.attackers), default=0)
        row["per-seed worst"] = ", ".join(
            f"{max(a.cmap_per_seed[i] for a in rec.attackers):.1f}" for i in range(n))
        by_arch = {a.arch: a.cmap for a in rec.attackers}
        row |= {arch: f"{by_arch[arch]:.1f}" if arch in by_arch else "" for arch in archs}
        row |= {"worst attacker": m.worst_attacker,
                "s": f"{rec.timings['total']:.0f}" if "total" in rec.timings else "",
                "git": rec.pabench.get("git", "")}
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, str]]) -> str:
    """GitHub-flavoured markdown, `|` in a cell escaped."""
    if not rows:
        return ""
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r[k].replace("|", r"\|") for k in head) + " |" for r in rows]
    return "\n".join(lines)


def select_table(tables: list[Table], protocol: str, benchmark: str, preset: str) -> Table:
    """The table of `protocol` (`ID` for its current version, or `ID@VERSION`, resolved as
    `--protocol` is) on `benchmark` and `preset`; a clear error listing what exists otherwise."""
    spec = get_protocol(protocol)
    for t in tables:
        if (t.benchmark, t.preset, t.protocol, t.version) == (benchmark, preset, spec.id,
                                                               spec.version):
            return t
    have = ", ".join(sorted(f"{t.protocol}@{t.version}" for t in tables
                            if (t.benchmark, t.preset) == (benchmark, preset))) or "none"
    raise PabenchError(f"no records of {spec.id}@{spec.version} on {benchmark} ({preset}); "
                       f"it has: {have}")
