"""Verified results as leaderboard tables: one per benchmark x preset x protocol id x version.

Records of different protocol versions measure different things, so they never share a table
(and so never share a rank or a Pareto front). Only tables of a protocol's current version and
of a ranked role rank their entries; older versions are archived, the next version's records
(made entry by entry) and diagnostic protocols shown apart, and records marked
`ranked: false` listed below their table with the reasons. Table and entry ids are the
records' own `table_id` / `entry_id`: unambiguous by construction, so no two tables or
entries share a page or a download.

The model registry and the learned baselines' recipes live beside the torch code that builds
them, so they are imported where an entry first asks for them: importing the leaderboard (and
reading records) does not load torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from pabench.errors import PabenchError
from pabench.leaderboard.paired import columns, rank_paired
from pabench.leaderboard.ranking import pareto_flags, tie_ranks
from pabench.protocols import LEGACY, NEXT, PROTOCOLS, ProtocolSpec
from pabench.records import (
    REFERENCES,
    AttackerResult,
    Metrics,
    Paired,
    Record,
    check_outcomes,
    check_record,
    read_record,
)

REFERENCE_NAME = "identity"  # the raw-data baseline every drop is measured against
LOSSLESS_CONTROLS = frozenset({"invert", "channel-permute"})
"""Baselines that keep every bit of the video: where they leak less than identity, the gap is
the attackers' distribution shift, not privacy."""
CHANCE_CONTROLS = frozenset({"black"})
"""Baselines that keep nothing: every score must sit at chance, the scale's other end."""


@dataclass
class Entry:
    """One verified record as the site shows it."""

    record: Record
    path: Path
    pareto: bool = False
    rank: tuple[int, int] | None = None  # privacy tie group, in ranked tables only
    vs_previous: Paired | None = None  # this less the entry above it (`paired.rank_paired`)

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

    @property
    def is_control(self) -> bool:
        """A lossless control baseline (pabench's own, as for the reference)."""
        s = self.record.submission
        return s.name in LOSSLESS_CONTROLS and s.format == "baseline"

    @property
    def is_chance_control(self) -> bool:
        """A control that keeps nothing (pabench's own)."""
        s = self.record.submission
        return s.name in CHANCE_CONTROLS and s.format == "baseline"

    @property
    def competes(self) -> bool:
        """Ranked and eligible for the Pareto front: an anonymizer, not the raw reference or a
        control, which mark the ends of the scale (an all-black video would otherwise rank
        first on privacy)."""
        return not (self.is_reference or self.is_control or self.is_chance_control)

    @property
    def learned_baseline(self) -> bool:
        """pabench's own trained f_A (`baseline:spact` ...), whose recipe can change."""
        from pabench.training.methods import RECIPES

        s = self.record.submission
        return s.format == "baseline" and s.name in RECIPES

    @cached_property  # the row, its badge and the entry page each read it
    def recipe_changes(self) -> list[str] | None:
        """How the f_A recipe of a pabench-trained baseline's record differs from that
        baseline's current recipe (seed aside: replicas differ in it), one "key recorded ->
        now" each; empty when it is the current one, None when not a learned baseline or the
        record predates records naming their recipe. A recipe change leaves old records
        standing until re-made: this tells a reader which ones score an older f_A."""
        from pabench.training.methods import default_recipe

        recorded = self.record.submission.meta.training_recipe
        if not self.learned_baseline or recorded is None:
            return None
        current = default_recipe(self.name).model_dump(mode="json")
        missing = "not recorded"
        return [f"{k} {json.dumps(recorded.get(k, missing))} -> {json.dumps(current.get(k))}"
                for k in sorted(current.keys() | recorded.keys())
                if k != "seed" and recorded.get(k, missing) != current.get(k, missing)]

    @property
    def recipe_text(self) -> str:
        """The download's `f_a_recipe` cell: "current", "older: ...", or empty."""
        changes = self.recipe_changes
        if changes is None:
            return ""
        return "older: " + "; ".join(changes) if changes else "current"

    @property
    def rank_text(self) -> str:
        """"3", or "2–4" for a tie group; empty when the entry is not ranked."""
        if self.rank is None:
            return ""
        lo, hi = self.rank
        return str(lo) if lo == hi else f"{lo}–{hi}"

    def raw_attacker(self, arch: str) -> AttackerResult | None:
        return next((a for a in self.record.raw_attackers if a.arch == arch), None)

    def raw_cmap(self, attacker: AttackerResult) -> float | None:
        """The same architecture on raw data: recorded with the attacker since v3, before
        that taken from the record's raw run."""
        if attacker.raw_cmap is not None:
            return attacker.raw_cmap
        raw = self.raw_attacker(attacker.arch)
        return raw.cmap if raw else None

    @staticmethod
    def is_probe(attacker: AttackerResult) -> bool:
        """A floor under the worst case (`linear-probe`), weak on raw data by design."""
        from pabench.models import MODELS

        return attacker.arch in MODELS and MODELS.get(attacker.arch).probe

    def row(self, table: Table) -> dict[str, object]:
        """The flat row published in the table's CSV/JSON download."""
        m, s, rec = self.m, self.record.submission, self.record
        norm_ci = m.privacy_norm_ci or (None, None)
        return {
            "entry": s.name,
            "table": table.id,
            "benchmark": rec.benchmark.name,
            "preset": rec.benchmark.preset,
            "protocol": rec.protocol.id,
            "protocol_version": rec.protocol.version,
            "status": rec.provenance,
            "listing": table.listing_of(self),
            "rank_lo": self.rank[0] if self.rank else None,
            "rank_hi": self.rank[1] if self.rank else None,
            "flags": "; ".join(rec.flags),
            "test_seed": rec.benchmark.test_seed,
            "reference": self.is_reference,
            "control": ("lossless" if self.is_control
                        else "chance" if self.is_chance_control else None),
            "pareto_optimal": self.pareto,
            "action_metric": m.action_metric,
            "action": m.action,
            "action_ci_lo": m.action_ci[0],
            "action_ci_hi": m.action_ci[1],
            "action_drop": m.action_drop,
            "privacy_cmap": m.privacy_cmap,
            "privacy_cmap_ci_lo": m.privacy_cmap_ci[0],
            "privacy_cmap_ci_hi": m.privacy_cmap_ci[1],
            "privacy_norm": m.privacy_norm,
            "privacy_norm_ci_lo": norm_ci[0],
            "privacy_norm_ci_hi": norm_ci[1],
            "base_cmap": m.base_cmap,
            "privacy_drop": m.privacy_drop,
            "privacy_f1": m.privacy_f1,
            "privacy_f1_ci_lo": m.privacy_f1_ci[0],
            "privacy_f1_ci_hi": m.privacy_f1_ci[1],
            "worst_attacker": m.worst_attacker,
            **columns(self.vs_previous),
            "params": s.params,
            "flops": s.flops,
            "sha256": s.sha256,
            "f_a_recipe": self.recipe_text,
            "created": rec.created,
            "record": self.path.name,
        }


Listing = Literal["ranked", "diagnostic", "next", "archived"]


@dataclass
class Table:
    """Records of one benchmark, preset, protocol and protocol version."""

    id: str  # the records' `table_id`
    benchmark: str
    preset: str
    protocol: str
    version: int
    entries: list[Entry] = field(default_factory=list)
    # next version only: the current table's entries, and which of them this one lacks
    current_entries: list[Entry] | None = None
    missing: list[Entry] = field(default_factory=list)

    @property
    def title(self) -> str:
        return PROTOCOLS.get(self.protocol).title if self.known_protocol else self.protocol

    @property
    def covers(self) -> tuple[int, int] | None:
        """Next version only: (entries of the current table re-made here, entries there)."""
        if self.current_entries is None:
            return None
        return len(self.current_entries) - len(self.missing), len(self.current_entries)

    @property
    def remake_command(self) -> str | None:
        """The command that makes the missing entries that are the project's own baselines
        (a submission's record can only be re-made from its author's file)."""
        names = [e.name for e in self.missing if e.record.submission.format == "baseline"]
        if not names:
            return None
        preset = f" --preset {self.preset}" if self.benchmark == "pa-synth" else ""
        return (f"pabench evaluate baseline:{','.join(names)} --protocol "
                f"{self.protocol}@{self.version} --benchmark {self.benchmark}{preset}")

    @property
    def current(self) -> bool:
        """Whether this table's protocol version is the one in the registry today."""
        return self.known_protocol and PROTOCOLS.get(self.protocol).version == self.version

    @property
    def upcoming(self) -> bool:
        """Whether this table holds records of the protocol's next version (in preparation)."""
        return self.protocol in NEXT and NEXT[self.protocol].version == self.version

    @property
    def spec(self) -> ProtocolSpec | None:
        """The spec that wrote these records: the registry's, the next, a legacy one, or
        unknown."""
        if self.current:
            return PROTOCOLS.get(self.protocol)
        if self.upcoming:
            return NEXT[self.protocol]
        return LEGACY.get((self.protocol, self.version))

    @property
    def listing(self) -> Listing:
        """Where the site shows this table: only a current, ranked-role protocol ranks; the
        next version's records are shown apart while they are being made; any other version
        (or a protocol this pabench does not know) is archived."""
        if self.upcoming:
            return "next"
        if not self.current:
            return "archived"
        # a paper reproduction is never ranked: shown apart, as a diagnostic is
        return "ranked" if PROTOCOLS.get(self.protocol).role == "ranked" else "diagnostic"

    @property
    def shown(self) -> list[Entry]:
        """The rows of the table proper (and of its plot): in a ranked table, ranked records."""
        return [e for e in self.entries if self.listing != "ranked" or e.record.ranked]

    @property
    def unranked(self) -> list[Entry]:
        """Records of a ranked table that must not be ranked, listed below it with flags."""
        return [e for e in self.entries if self.listing == "ranked" and not e.record.ranked]

    def listing_of(self, entry: Entry) -> str:
        """The entry's place on the site: its table's listing, or "unranked" below it."""
        unranked = self.listing == "ranked" and not entry.record.ranked
        return "unranked" if unranked else self.listing

    @property
    def base_cmap(self) -> float | None:
        """Privacy at chance (the attributes' base-rate cMAP), when the records carry it."""
        return next((e.m.base_cmap for e in self.entries if e.m.base_cmap is not None), None)

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
        return [e.row(self) for e in self.entries]


def load_records(results: Path) -> list[tuple[Path, Record]]:
    """Every record under `results` (hidden files, such as temp files, and the raw references
    in `references/` skipped), in a stable order, each checked by `check_record`. Symbolic
    links are refused: a record must be the file that was reviewed."""
    results = Path(results)
    if not results.exists():
        raise PabenchError(f"results folder not found: {results}")
    if not results.is_dir():
        raise PabenchError(f"{results}: results folder is not a folder")
    paths = sorted(
        p for p in results.rglob("*.json")
        if not any(part.startswith(".") for part in p.relative_to(results).parts)
        and p.parent.name != REFERENCES
    )
    for p in paths:
        if p.is_symlink():
            raise PabenchError(f"{p}: is a symbolic link; records must be regular files")
    return [(p, check_outcomes(check_record(read_record(p), p), p)) for p in paths]


def build_tables(records: Iterable[tuple[Path, Record]], *, paired: bool = True
                 ) -> list[Table]:
    """Group records into tables; in ranked tables mark the Pareto front and the privacy tie
    groups of the ranked records other than the reference and the controls: from paired
    comparisons of neighbours where every such record has outcomes (`paired.rank_paired`;
    `paired=False` skips them, for a check of the folder), else from interval overlap. Rows
    are ordered by worst-case privacy cMAP, best first.

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
        table.entries.sort(key=lambda e: (e.m.privacy_cmap, -e.m.action, e.name))
        if table.listing != "ranked":
            continue
        ranked = [e for e in table.shown if e.competes]
        flags = pareto_flags([(e.m.action, e.m.privacy_cmap) for e in ranked])
        for e, flag in zip(ranked, flags, strict=True):
            e.pareto = flag
        if not (paired and rank_paired(ranked)):
            ranks = tie_ranks([e.m.privacy_cmap for e in ranked],
                              [e.m.privacy_cmap_ci for e in ranked])
            for e, rank in zip(ranked, ranks, strict=True):
                e.rank = rank
    for table in tables.values():
        if table.upcoming:
            now = next((t for t in tables.values() if t.current and (t.benchmark, t.preset,
                        t.protocol) == (table.benchmark, table.preset, table.protocol)), None)
            if now is not None:
                names = {e.name.casefold() for e in table.entries}
                table.current_entries = now.entries
                table.missing = [e for e in now.entries if e.name.casefold() not in names]
    order = {name: i for i, name in enumerate(PROTOCOLS.names())}
    return sorted(
        tables.values(),
        key=lambda t: (t.benchmark, t.preset, order.get(t.protocol, len(order)), t.protocol,
                       not t.current, -t.version),
    )
