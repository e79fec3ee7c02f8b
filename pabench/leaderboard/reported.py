"""Numbers copied from papers: vendored as data with citations, shown apart from verified results.

Reported rows come from different targets, attackers and clip sizes, so they are grouped by
source paper and setting and never ranked against verified rows or against other sources.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from pabench.errors import PabenchError
from pabench.io import atomic_write_bytes, atomic_write_text
from pabench.leaderboard.links import PENALTY_PAPER, SPACT_PAPER

CSV_NAME = "paper_results.csv"
CITATIONS_NAME = "citations.json"
COLUMNS = [
    "source", "table", "protocol", "setting", "action_dataset", "privacy_dataset", "method",
    "action_metric", "action", "privacy_cmap", "privacy_f1", "note",
]
REQUIRED = ["source", "table", "protocol", "setting", "method"]
ACTION_METRICS = {"top1", "cmap"}
RAW_METHOD = "Raw data"


def slugify(name: str, max_len: int = 60) -> str:
    """A lowercase file-name-safe slug; a hash suffix keeps altered names distinct."""
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9_-]+", "-", name.lower())).strip("-_")
    if slug != name or len(slug) > max_len:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        slug = f"{slug[:max_len].rstrip('-_')}-{digest}" if slug else digest
    return slug


class Citation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str
    authors: str
    venue: str
    year: int
    url: str = ""


_SPACT = Citation(
    title="SPAct: Self-supervised Privacy Preservation for Action Recognition",
    authors="Ishan Rajendrakumar Dave, Chen Chen, Mubarak Shah",
    venue="CVPR", year=2022, url=SPACT_PAPER,
)

# The papers behind the shared CSV, keyed by its `source` column.
CITATIONS: dict[str, Citation] = {
    "SPAct (Dave et al., CVPR 2022)": _SPACT,
    "SPAct supplementary (Table 2)": _SPACT,
    "Penalty-driven anonymization (Aslam & Nasrollahi, 2025)": Citation(
        title="Balancing Privacy and Action Performance: "
        "A Penalty-Driven Approach to Image Anonymization",
        authors="Nazia Aslam, Kamal Nasrollahi", venue="preprint", year=2025, url=PENALTY_PAPER,
    ),
    "MPPAR (NeurIPS 2023) supplementary, Table 1": Citation(
        title="Joint Attribute and Model Generalization Learning for "
        "Privacy-Preserving Action Recognition",
        authors="Duo Peng, Li Xu, Qiuhong Ke, Ping Hu, Jun Liu", venue="NeurIPS", year=2023,
    ),
}


@dataclass
class ReportedGroup:
    """Rows of one source paper in one setting on one dataset pair: comparable only here."""

    source: str
    citation: Citation
    table: str
    protocol: str
    setting: str
    action_dataset: str
    privacy_dataset: str
    note: str  # the shared note, or "" when rows differ (then each row shows its own)
    rows: list[dict[str, object]]

    @property
    def id(self) -> str:
        parts = [self.source, self.table, self.setting, self.action_dataset, self.privacy_dataset]
        return slugify("reported-" + "__".join(parts), max_len=48)


def _check_row(path: Path, line: int, row: dict[str, object]) -> None:
    where = f"{path}:{line}"
    for col in REQUIRED:
        if not row[col]:
            raise PabenchError(f"{where}: empty '{col}'")
    for col, hi in (("action", 100.0), ("privacy_cmap", 100.0), ("privacy_f1", 1.0)):
        v = row[col]
        if v is not None and not (isinstance(v, float) and 0.0 <= v <= hi):
            raise PabenchError(f"{where}: '{col}' must be a number in [0, {hi:g}], got {v!r}")
    if (row["action"] is None) != (not row["action_metric"]):
        raise PabenchError(f"{where}: 'action' and 'action_metric' must be given together")
    if row["action_metric"] and row["action_metric"] not in ACTION_METRICS:
        raise PabenchError(
            f"{where}: action_metric must be one of {sorted(ACTION_METRICS)}, "
            f"got {row['action_metric']!r}"
        )
    if all(row[c] is None for c in ("action", "privacy_cmap", "privacy_f1")):
        raise PabenchError(f"{where}: row has no numbers")


def read_reported_csv(path: Path) -> list[dict[str, object]]:
    """Parse and validate the CSV; any problem is one line naming the file and line."""
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise PabenchError(f"{path}: cannot read CSV ({str(e).splitlines()[0]})") from None
    if list(df.columns) != COLUMNS:
        raise PabenchError(f"{path}: columns must be {','.join(COLUMNS)}")
    rows = []
    for i, raw in enumerate(df.to_dict("records"), start=2):
        row: dict[str, object] = {k: v.strip() for k, v in raw.items()}
        for col in ("action", "privacy_cmap", "privacy_f1"):
            text = row[col]
            try:
                row[col] = float(text) if text else None
            except ValueError:
                raise PabenchError(f"{path}:{i}: '{col}' is not a number: {text!r}") from None
            if row[col] is not None and not math.isfinite(row[col]):
                raise PabenchError(f"{path}:{i}: '{col}' is not finite")
        _check_row(path, i, row)
        rows.append(row)
    return rows


def _missing_citations(rows: list[dict[str, object]], citations: dict[str, Citation]) -> set:
    return {str(r["source"]) for r in rows} - set(citations)


def import_reported(csv: Path, out: Path, extra_citations: Path | None = None) -> list[Path]:
    """Validate a reported-results CSV and vendor it verbatim into `out` with its citations."""
    rows = read_reported_csv(csv)
    citations = dict(CITATIONS)
    if extra_citations is not None:
        citations.update(_read_citations(extra_citations))
    missing = _missing_citations(rows, citations)
    if missing:
        raise PabenchError(
            f"{csv}: no citation for source(s) {', '.join(sorted(missing))}; "
            "pass --citations FILE.json"
        )
    used = {s: citations[s] for s in sorted({str(r["source"]) for r in rows})}
    text = json.dumps({s: c.model_dump() for s, c in used.items()}, indent=2, ensure_ascii=False)
    try:  # atomic: a reader (or a build) never sees half a file
        atomic_write_bytes(out / CSV_NAME, csv.read_bytes())
        atomic_write_text(out / CITATIONS_NAME, text + "\n")
    except OSError as e:
        raise PabenchError(f"{out}: cannot write the reported results ({e.strerror or e})"
                           ) from None
    return [out / CSV_NAME, out / CITATIONS_NAME]


def _read_citations(path: Path) -> dict[str, Citation]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {k: Citation.model_validate(v) for k, v in data.items()}
    except (OSError, json.JSONDecodeError, AttributeError, ValidationError) as e:
        raise PabenchError(f"{path}: invalid citations file ({str(e).splitlines()[0]})") from None


def load_reported(folder: Path) -> list[ReportedGroup]:
    """The vendored rows grouped for display; a folder without a CSV yields no groups."""
    csv = folder / CSV_NAME
    if not csv.is_file():
        return []
    rows = read_reported_csv(csv)
    citations = _read_citations(folder / CITATIONS_NAME)
    missing = _missing_citations(rows, citations)
    if missing:
        names = ", ".join(sorted(missing))
        raise PabenchError(f"{folder / CITATIONS_NAME}: no citation for {names}")
    groups: dict[tuple[str, ...], list[dict[str, object]]] = {}
    for row in rows:
        key = tuple(str(row[c]) for c in (
            "source", "table", "protocol", "setting", "action_dataset", "privacy_dataset"))
        groups.setdefault(key, []).append(row)
    out = []
    for key, members in groups.items():
        notes = {r["note"] for r in members}
        out.append(ReportedGroup(
            source=key[0], citation=citations[key[0]], table=key[1], protocol=key[2],
            setting=key[3], action_dataset=key[4], privacy_dataset=key[5],
            note=str(members[0]["note"]) if len(notes) == 1 else "", rows=members,
        ))
    return out


def by_source(groups: list[ReportedGroup]) -> list[tuple[str, Citation, list[ReportedGroup]]]:
    """Groups gathered per source paper, in the order the CSV first names each source."""
    out: dict[str, list[ReportedGroup]] = {}
    for g in groups:
        out.setdefault(g.source, []).append(g)
    return [(source, members[0].citation, members) for source, members in out.items()]
