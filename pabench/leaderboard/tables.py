"""Verified results as leaderboard tables: one per benchmark x preset x protocol id x version.

Records of different protocol versions measure different things, so they never share a table
(and so never share a rank or a Pareto front). Table and entry ids are the records' own
`table_id` / `entry_id`: unambiguous by construction, so no two tables or entries share a page
or a download.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pabench.errors import PabenchError
from pabench.protocols import PROTOCOLS
from pabench.records import AttackerResult, Metrics, Record, read_record

REFERENCE_NAME = "identity"  # the raw-data baseline every drop is measured against
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_SAMPLE_BYTES = 16 * 1024 * 1024


@dataclass
class Entry:
    """One verified record as the site shows it."""

    record: Record
    path: Path
    pareto: bool = False

    @property
    def id(self) -> str:
        """The entry page's and sample files' stem."""
        return self.record.entry_id

    @property
    def name(self) -> str:
        return self.record.submission.name

    @property
    def m(self) -> Metrics:
        return self.record.metrics

    @property
    def is_reference(self) -> bool:
        """Only pabench's own identity baseline is the raw reference, not any entry that
        happens to be called `identity`."""
        s = self.record.submission
        return s.name == REFERENCE_NAME and s.format == "baseline"

    def raw_attacker(self, arch: str) -> AttackerResult | None:
        return next((a for a in self.record.raw_attackers if a.arch == arch), None)

    def row(self, table_id: str) -> dict[str, object]:
        """The flat row published in the table's CSV/JSON download."""
        m, s = self.m, self.record.submission
        return {
            "entry": s.name,
            "table": table_id,
            "benchmark": self.record.benchmark.name,
            "preset": self.record.benchmark.preset,
            "protocol": self.record.protocol.id,
            "protocol_version": self.record.protocol.version,
            "status": "verified",
            "reference": self.is_reference,
            "pareto_optimal": self.pareto,
            "action_top1": m.action_top1,
            "action_top1_ci_lo": m.action_top1_ci[0],
            "action_top1_ci_hi": m.action_top1_ci[1],
            "action_drop": m.action_drop,
            "privacy_cmap": m.privacy_cmap,
            "privacy_cmap_ci_lo": m.privacy_cmap_ci[0],
            "privacy_cmap_ci_hi": m.privacy_cmap_ci[1],
            "privacy_drop": m.privacy_drop,
            "privacy_f1": m.privacy_f1,
            "privacy_f1_ci_lo": m.privacy_f1_ci[0],
            "privacy_f1_ci_hi": m.privacy_f1_ci[1],
            "worst_attacker": m.worst_attacker,
            "params": s.params,
            "flops": s.flops,
            "sha256": s.sha256,
            "created": self.record.created,
            "record": self.path.name,
        }


@dataclass
class Table:
    """Entries that may be ranked against each other."""

    id: str  # the records' `table_id`
    benchmark: str
    preset: str
    protocol: str
    version: int
    entries: list[Entry] = field(default_factory=list)

    @property
    def title(self) -> str:
        return PROTOCOLS.get(self.protocol).title if self.known_protocol else self.protocol

    @property
    def current(self) -> bool:
        """Whether this table's protocol version is the one in the registry today."""
        return self.known_protocol and PROTOCOLS.get(self.protocol).version == self.version

    @property
    def novel(self) -> bool:
        """Whether the protocol demands a declared, disjoint training set."""
        return self.known_protocol and PROTOCOLS.get(self.protocol).novel

    @property
    def action_metric(self) -> str:
        """How utility is scored here: top-1 (single-label actions) or cMAP (multi-label)."""
        return "cMAP" if any(e.m.action_metric == "cmap" for e in self.entries) else "top-1"

    @property
    def known_protocol(self) -> bool:
        return self.protocol in PROTOCOLS

    @property
    def reference(self) -> Metrics | None:
        """The raw-data point: the identity entry if present, else the records' own raw."""
        for e in self.entries:
            if e.is_reference:
                return e.m
        return next((e.record.raw for e in self.entries if e.record.raw is not None), None)

    def rows(self) -> list[dict[str, object]]:
        return [e.row(self.id) for e in self.entries]


def pareto_flags(points: list[tuple[float, float]]) -> list[bool]:
    """(action top-1, privacy cMAP) -> optimal? Higher action and lower privacy are better.

    A point is dominated by one at least as good on both axes and better on one (ties are not
    dominated). One sweep from the best action down, O(n log n): thousands of entries are fine.
    """
    order = sorted(range(len(points)), key=lambda i: -points[i][0])
    flags = [True] * len(points)
    best_above = float("inf")  # lowest privacy among strictly higher action
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and points[order[j]][0] == points[order[i]][0]:
            j += 1
        group = order[i:j]
        lowest = min(points[k][1] for k in group)
        for k in group:
            p = points[k][1]
            flags[k] = not (best_above <= p or lowest < p)
        best_above = min(best_above, lowest)
        i = j
    return flags


def load_records(results: Path) -> list[tuple[Path, Record]]:
    """Every record under `results` (hidden files, such as temp files, skipped), in a stable
    order. Symbolic links are refused: a record must be the file that was reviewed."""
    results = Path(results)
    if not results.exists():
        raise PabenchError(f"results folder not found: {results}")
    if not results.is_dir():
        raise PabenchError(f"{results}: results folder is not a folder")
    paths = sorted(
        p for p in results.rglob("*.json")
        if not any(part.startswith(".") for part in p.relative_to(results).parts)
    )
    for p in paths:
        if p.is_symlink():
            raise PabenchError(f"{p}: is a symbolic link; records must be regular files")
    return [(p, read_record(p)) for p in paths]


def sample_files(path: Path, record: Record) -> list[Path]:
    """A record's sample strips, checked before anything is copied: inside the record's folder
    (after following links), regular files, PNG, at most MAX_SAMPLE_BYTES."""
    base = path.parent.resolve()
    sources = []
    for rel in record.samples:
        src = (base / rel).resolve()
        if not src.is_relative_to(base):
            raise PabenchError(f"{path}: sample '{rel}' lies outside the record's folder")
        if not src.is_file():
            raise PabenchError(f"{path}: sample '{rel}' not found")
        if src.stat().st_size > MAX_SAMPLE_BYTES:
            raise PabenchError(f"{path}: sample '{rel}' is larger than "
                               f"{MAX_SAMPLE_BYTES // 2**20} MiB")
        with src.open("rb") as f:
            if f.read(8) != PNG_MAGIC:
                raise PabenchError(f"{path}: sample '{rel}' is not a PNG")
        sources.append(src)
    return sources


def build_tables(records: Iterable[tuple[Path, Record]]) -> list[Table]:
    """Group records into tables, mark the Pareto front, order rows by action top-1.

    Two records of one entry (the same name, ignoring case: case-insensitive file systems
    would give them one page) are refused, naming both files."""
    tables: dict[str, Table] = {}
    seen: dict[str, Path] = {}
    for path, rec in records:
        b, p = rec.benchmark, rec.protocol
        table = tables.setdefault(
            rec.table_id, Table(rec.table_id, b.name, b.preset, p.id, p.version))
        other = seen.setdefault(rec.entry_id.casefold(), path)
        if other != path:
            raise PabenchError(
                f"{path}: entry '{rec.submission.name}' is already in table {table.id} ({other})"
            )
        table.entries.append(Entry(record=rec, path=path))
    for table in tables.values():
        flags = pareto_flags([(e.m.action_top1, e.m.privacy_cmap) for e in table.entries])
        for e, flag in zip(table.entries, flags, strict=True):
            e.pareto = flag
        table.entries.sort(key=lambda e: (-e.m.action_top1, e.m.privacy_cmap, e.name))
    order = {name: i for i, name in enumerate(PROTOCOLS.names())}
    return sorted(
        tables.values(),
        key=lambda t: (t.benchmark, t.preset, order.get(t.protocol, len(order)), t.protocol,
                       not t.current, -t.version),
    )
