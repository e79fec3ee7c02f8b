"""Render records and reported results into a static site that opens from disk with no network.

Output is a pure function of the inputs (no build time, sorted everywhere), so building on a
fresh clone reproduces the published site byte for byte.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined

from pabench import __version__
from pabench.errors import PabenchError
from pabench.leaderboard.reported import ReportedGroup, by_source, load_reported
from pabench.leaderboard.scatter import scatter
from pabench.leaderboard.tables import Entry, Table, build_tables, load_records
from pabench.protocols import PROTOCOLS

MARKER = ".pabench-site"  # only folders carrying it are wiped before a rebuild
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROW_COLUMNS = [
    "entry", "table", "benchmark", "preset", "protocol", "protocol_version", "status",
    "reference", "pareto_optimal", "action_top1", "action_top1_ci_lo", "action_top1_ci_hi",
    "action_drop", "privacy_cmap", "privacy_cmap_ci_lo", "privacy_cmap_ci_hi", "privacy_drop",
    "privacy_f1", "privacy_f1_ci_lo", "privacy_f1_ci_hi", "worst_attacker", "params", "flops",
    "sha256", "created", "record",
]
REPORTED_COLUMNS = [
    "source", "table", "protocol", "setting", "action_dataset", "privacy_dataset", "method",
    "action_metric", "action", "privacy_cmap", "privacy_f1", "note",
]


@dataclass(frozen=True)
class BuildSummary:
    out: Path
    tables: int
    entries: int
    reported_groups: int


def _num(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    """A relative drop (a fraction) as a percentage."""
    return "—" if v is None else f"{v * 100:.1f}%"


def _human(n: int | None) -> str:
    if n is None:
        return "—"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _attr(v: float | None) -> str:
    """A value for a data-value attribute: sortable by the page script, empty when missing."""
    return "" if v is None else repr(float(v))


def _is_web_url(v: object) -> bool:
    """Only http(s) links from submission metadata become hrefs (no javascript: URLs)."""
    return isinstance(v, str) and v.lower().startswith(("https://", "http://"))


def environment() -> Environment:
    """Autoescaping jinja environment: entry names and paper notes are untrusted text."""
    env = Environment(
        loader=PackageLoader("pabench.leaderboard", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(num=_num, pct=_pct, human=_human, attr=_attr)
    env.tests["web_url"] = _is_web_url
    return env


def _flatten(data: object, prefix: str = "") -> list[tuple[str, str]]:
    """A nested model_dump as (dotted key, text) rows for the protocol page."""
    if isinstance(data, dict):
        return [row for k, v in data.items() for row in _flatten(v, f"{prefix}{k}.")]
    if isinstance(data, list | tuple):
        return [(prefix.rstrip("."), ", ".join(str(x) for x in data) or "—")]
    return [(prefix.rstrip("."), "—" if data is None else str(data))]


def _sample_sources(entry: Entry) -> list[Path]:
    """An entry's sample strips, checked before anything is written: inside its folder, PNG."""
    base = entry.path.parent.resolve()
    sources = []
    for rel in entry.record.samples:
        src = (base / rel).resolve()
        if not src.is_relative_to(base):
            raise PabenchError(f"{entry.path}: sample '{rel}' lies outside the record's folder")
        if not src.is_file():
            raise PabenchError(f"{entry.path}: sample '{rel}' not found")
        with src.open("rb") as f:
            if f.read(8) != PNG_MAGIC:
                raise PabenchError(f"{entry.path}: sample '{rel}' is not a PNG")
        sources.append(src)
    return sources


def _attribute_rows(entry: Entry) -> list[dict[str, object]]:
    """Per-attribute AP/F1 for each attacker next to the same attacker on raw data."""
    attrs = sorted({a for att in entry.record.attackers for a in att.per_attribute})
    rows = []
    for attr in attrs:
        cells = []
        for att in entry.record.attackers:
            raw = entry.raw_attacker(att.arch)
            cur = att.per_attribute.get(attr, {})
            ref = raw.per_attribute.get(attr, {}) if raw else {}
            cells.append({
                "ap": cur.get("ap"), "f1": cur.get("f1"),
                "raw_ap": ref.get("ap"), "raw_f1": ref.get("f1"),
            })
        rows.append({
            "name": attr, "cells": cells,
            "excluded": attr in entry.m.excluded_attributes,
        })
    return rows


def _credits(meta: dict) -> str:
    """Authors and licence from free-form submission metadata, as one line."""
    authors = meta.get("authors")
    if isinstance(authors, list):
        authors = ", ".join(str(a) for a in authors)
    parts = [f"by {authors}" if authors else "", f"licence {meta['licence']}" if meta.get(
        "licence") else ""]
    return " · ".join(p for p in parts if p)


def _prepare_out(out: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise PabenchError(f"{out} exists and is not a folder")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise PabenchError(f"{out} is not empty and was not built by pabench; pick --out")
        shutil.rmtree(out)
    for sub in ("entries", "protocols", "data", "samples", "static"):
        (out / sub).mkdir(parents=True)
    (out / MARKER).write_text("built by `pabench leaderboard build`; rebuilt from scratch\n")


def _write_table_data(out: Path, stem: str, meta: dict, rows: list[dict], columns: list) -> None:
    doc = {**meta, "rows": rows}
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    (out / "data" / f"{stem}.json").write_text(text, encoding="utf-8")
    pd.DataFrame(rows, columns=columns).to_csv(out / "data" / f"{stem}.csv", index=False)


def _table_meta(table: Table) -> dict[str, object]:
    ref = table.reference
    return {
        "table": table.id, "benchmark": table.benchmark, "preset": table.preset,
        "protocol": table.protocol, "protocol_version": table.version,
        "raw_reference": None if ref is None else {
            "action_top1": ref.action_top1, "privacy_cmap": ref.privacy_cmap,
            "privacy_f1": ref.privacy_f1,
        },
    }


def build_site(results: Path, reported: Path, out: Path) -> BuildSummary:
    """Build index, entry, protocol and reported pages plus JSON/CSV downloads into `out`.

    Every input is read and checked before `out` is touched, so a bad record leaves the
    previous site in place.
    """
    tables = build_tables(load_records(results))
    groups: list[ReportedGroup] = load_reported(reported)
    samples = {e.slug: _sample_sources(e) for t in tables for e in t.entries}
    _prepare_out(out)
    env = environment()
    static = resources.files("pabench.leaderboard") / "static"
    for item in static.iterdir():
        if item.is_file():
            (out / "static" / item.name).write_bytes(item.read_bytes())

    def render(template: str, path: str, **ctx: object) -> None:
        root = "../" * path.count("/") or "./"
        html = env.get_template(template).render(root=root, version=__version__, **ctx)
        (out / path).write_text(html, encoding="utf-8")

    plots = {t.id: scatter(t) for t in tables}
    for t in tables:
        _write_table_data(out, t.id, _table_meta(t), t.rows(), ROW_COLUMNS)
        for e in t.entries:
            copied = []
            for i, src in enumerate(samples[e.slug]):
                copied.append(f"samples/{e.slug}-{i}.png")
                shutil.copyfile(src, out / copied[-1])
            render(
                "entry.html.j2", f"entries/{e.slug}.html", table=t, entry=e,
                samples=copied, attribute_rows=_attribute_rows(e),
                training=e.record.submission.meta.get("training_data"),
                credits=_credits(e.record.submission.meta),
                paper_url=e.record.submission.meta.get("paper_url"),
            )
    for g in groups:
        meta = {
            "source": g.source, "citation": g.citation.model_dump(), "table": g.table,
            "protocol": g.protocol, "setting": g.setting, "action_dataset": g.action_dataset,
            "privacy_dataset": g.privacy_dataset, "status": "reported",
        }
        _write_table_data(out, g.id, meta, g.rows, REPORTED_COLUMNS)

    specs = [spec for _, spec in PROTOCOLS.items()]
    for spec in specs:
        render(
            "protocol.html.j2", f"protocols/{spec.id}.html", spec=spec,
            fields=_flatten(spec.model_dump()),
            tables=[t for t in tables if t.protocol == spec.id],
        )
    render("protocols.html.j2", "protocols.html", specs=specs, tables=tables)
    render("reported.html.j2", "reported.html", sources=by_source(groups))
    render(
        "index.html.j2", "index.html", tables=tables, plots=plots, sources=by_source(groups),
        n_entries=sum(len(t.entries) for t in tables),
    )
    return BuildSummary(out, len(tables), sum(len(t.entries) for t in tables), len(groups))


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Tests serve many requests; one log line each would bury their output."""


def make_server(site: Path, port: int = 8000, quiet: bool = False) -> ThreadingHTTPServer:
    """An HTTP server for `site` on 127.0.0.1 only (port 0 picks a free one)."""
    if not (site / "index.html").is_file():
        raise PabenchError(f"{site}/index.html not found; run `pabench leaderboard build` first")
    cls = _QuietHandler if quiet else SimpleHTTPRequestHandler
    return ThreadingHTTPServer(("127.0.0.1", port), partial(cls, directory=str(site)))
