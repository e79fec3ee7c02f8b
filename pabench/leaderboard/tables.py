"""Verified results as leaderboard tables: one per benchmark x preset x protocol id x version.

Records of different protocol versions measure different things, so they never share a table
(and so never share a rank or a Pareto front).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pabench.errors import PabenchError
from pabench.protocols import PROTOCOLS
from pabench.records import AttackerResult, Metrics, Record, read_record

REFERENCE_NAME = "identity"  # the raw-data baseline every drop is measured against


def slugify(name: str, max_len: int = 60) -> str:
    """A lowercase file-name-safe slug; a hash suffix keeps altered names distinct."""
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9_-]+", "-", name.lower())).strip("-_")
    if slug != name or len(slug) > max_len:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        slug = f"{slug[:max_len].rstrip('-_')}-{digest}" if slug else digest
    return slug


@dataclass
class Entry:
    """One verified record as the site shows it."""

    record: Record
    path: Path
    slug: str
    pareto: bool = False

    @property
    def name(self) -> str:
        return self.record.submission.name

    @property
    def m(self) -> Metrics:
        return self.record.metrics

    @property
    def is_reference(self) -> bool:
        return self.name == REFERENCE_NAME

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

    benchmark: str
    preset: str
    protocol: str
    version: int
    entries: list[Entry] = field(default_factory=list)

    @property
    def id(self) -> str:
        return slugify(f"{self.benchmark}-{self.preset}__{self.protocol}__v{self.version}")

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
    """(action top-1, privacy cMAP) -> optimal? Higher action and lower privacy are better."""
    flags = []
    for i, (a, p) in enumerate(points):
        dominated = any(
            a2 >= a and p2 <= p and (a2 > a or p2 < p)
            for j, (a2, p2) in enumerate(points)
            if j != i
        )
        flags.append(not dominated)
    return flags


def load_records(results: Path) -> list[tuple[Path, Record]]:
    """Every record under `results` (samples and temp files skipped), in a stable order."""
    if not results.is_dir():
        raise PabenchError(f"results folder not found: {results}")
    paths = sorted(p for p in results.rglob("*.json") if not p.name.startswith("."))
    return [(p, read_record(p)) for p in paths]


def build_tables(records: Iterable[tuple[Path, Record]]) -> list[Table]:
    """Group records into tables, mark the Pareto front, order rows by action top-1."""
    tables: dict[tuple[str, str, str, int], Table] = {}
    seen: dict[tuple[str, str], Path] = {}
    for path, rec in records:
        key = (rec.benchmark.name, rec.benchmark.preset, rec.protocol.id, rec.protocol.version)
        table = tables.setdefault(key, Table(*key))
        other = seen.setdefault((table.id, rec.submission.name), path)
        if other != path:
            raise PabenchError(
                f"{path}: entry '{rec.submission.name}' is already in table {table.id} ({other})"
            )
        slug = slugify(f"{table.id}__{rec.submission.name}")
        table.entries.append(Entry(record=rec, path=path, slug=slug))
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
