"""Render records and reported results into a static site that opens from disk with no network.

Output is a pure function of the inputs (no build time, sorted everywhere), so building on a
fresh clone reproduces the published site byte for byte. Records are untrusted text: pages are
autoescaped, links are http(s) only, a Content-Security-Policy allows only the site's own
script, and CSV cells that a spreadsheet would run as formulas are defused.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined

from pabench import __version__
from pabench.errors import PabenchError
from pabench.leaderboard.agreement import MIN_SHARED, rank_agreement
from pabench.leaderboard.calibration import MEANING, METHODS, calibrate
from pabench.leaderboard.curves import curve_plots
from pabench.leaderboard.links import entry_links
from pabench.leaderboard.paired import columns as paired_columns
from pabench.leaderboard.reported import ReportedGroup, by_source, load_reported
from pabench.leaderboard.samples import sample_files
from pabench.leaderboard.scatter import scatter
from pabench.leaderboard.tables import Entry, Table, build_tables, load_records
from pabench.metrics import CI_ALPHA
from pabench.protocols import NEXT, PROTOCOLS
from pabench.records import RecordMeta

if TYPE_CHECKING:
    from pabench.submission import TrainingData

MARKER = ".pabench-site"  # only folders carrying it are replaced by a rebuild
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
ROW_COLUMNS = [
    "entry", "table", "benchmark", "preset", "protocol", "protocol_version", "status",
    "listing", "rank_lo", "rank_hi", "flags", "test_seed", "reference", "pareto_optimal",
    "action_metric", "action", "action_ci_lo", "action_ci_hi", "action_drop", "privacy_cmap",
    "privacy_cmap_ci_lo", "privacy_cmap_ci_hi", "privacy_norm", "privacy_norm_ci_lo",
    "privacy_norm_ci_hi", "base_cmap", "privacy_drop", "privacy_f1", "privacy_f1_ci_lo",
    "privacy_f1_ci_hi", "worst_attacker", *paired_columns(None), "params", "flops", "sha256",
    "f_a_recipe", "created", "record",
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


def sample_path(entry_id: str, i: int) -> str:
    """Where the site keeps an entry's i-th sample strip (raw frames over anonymized ones)."""
    return f"samples/{entry_id}-{i}.png"


def _thumbnail(entry: Entry) -> str | None:
    """A table row's thumbnail: the entry's first sample strip, if it has one."""
    return sample_path(entry.id, 0) if entry.record.samples else None


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
    env.filters.update(num=_num, pct=_pct, human=_human, attr=_attr, links=entry_links,
                       thumbnail=_thumbnail)
    env.globals["ci_level"] = f"{1 - CI_ALPHA:.0%}"  # the bootstrap intervals' level
    env.tests["web_url"] = _is_web_url
    return env


def _flatten(data: object, prefix: str = "") -> list[tuple[str, str]]:
    """A nested model_dump as (dotted key, text) rows for the protocol page."""
    if isinstance(data, dict):
        return [row for k, v in data.items() for row in _flatten(v, f"{prefix}{k}.")]
    if isinstance(data, list | tuple):
        return [(prefix.rstrip("."), ", ".join(str(x) for x in data) or "—")]
    return [(prefix.rstrip("."), "—" if data is None else str(data))]


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


def _credits(meta: RecordMeta) -> str:
    """Authors and licence from the submission's sidecar, as one line."""
    parts = [f"by {', '.join(meta.authors)}" if meta.authors else "",
             f"licence {meta.licence}" if meta.licence else ""]
    return " · ".join(p for p in parts if p)


def _declared(meta: RecordMeta) -> TrainingData | None:
    t = meta.training_data
    return t if (t.datasets or t.action_classes or t.attributes) else None


def _csv_cell(v: object) -> object:
    """Text a spreadsheet would run as a formula gets a leading quote; numbers stay numbers."""
    if isinstance(v, str) and v.startswith(FORMULA_START) and not _NUMBER.fullmatch(v):
        return "'" + v
    return v


class _Files:
    """Writes the site's files under `root`, refusing to write one path twice (compared
    ignoring case, as macOS and Windows do): two things never share a page or a download."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: set[str] = set()

    def path(self, rel: str) -> Path:
        key = rel.casefold()
        if key in self.written:
            raise PabenchError(f"two site files would be written to {rel}")
        self.written.add(key)
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def text(self, rel: str, text: str) -> None:
        self.path(rel).write_text(text, encoding="utf-8")

    def table_data(self, stem: str, meta: dict, rows: list[dict], columns: list[str]) -> None:
        """data/STEM.json (strict JSON: NaN refused) and data/STEM.csv (formula-safe)."""
        try:
            text = json.dumps({**meta, "rows": rows}, indent=2, ensure_ascii=False,
                              allow_nan=False)
        except ValueError:
            raise PabenchError(f"data/{stem}.json: refusing to write a non-finite number"
                               ) from None
        self.text(f"data/{stem}.json", text + "\n")
        safe = [{k: _csv_cell(v) for k, v in row.items()} for row in rows]
        self.text(f"data/{stem}.csv", pd.DataFrame(safe, columns=columns).to_csv(index=False))


def _table_meta(table: Table) -> dict[str, object]:
    ref = table.reference
    return {
        "table": table.id, "benchmark": table.benchmark, "preset": table.preset,
        "protocol": table.protocol, "protocol_version": table.version,
        "listing": table.listing, "base_cmap": table.base_cmap,
        "raw_reference": None if ref is None else {
            "action": ref.action, "action_metric": ref.action_metric,
            "privacy_cmap": ref.privacy_cmap, "privacy_f1": ref.privacy_f1,
        },
    }


def _check_out(out: Path, inputs: list[Path]) -> None:
    """`out` is replaced wholesale, so it must be pabench's own: not a link, not a file, not a
    foreign folder, and neither inside nor around the folders the site is built from."""
    if out.name in ("", ".", ".."):
        raise PabenchError(f"--out {out}: name the site's own folder (such as site)")
    if out.is_symlink():
        raise PabenchError(f"{out} is a symbolic link; pass the folder it points to as --out")
    if out.exists():
        if not out.is_dir():
            raise PabenchError(f"{out} exists and is not a folder")
        if any(out.iterdir()) and not (out / MARKER).is_file():
            raise PabenchError(f"{out} is not empty and was not built by pabench; pick --out")
    real = out.resolve()
    for src in inputs:
        s = src.resolve()
        if real == s or real.is_relative_to(s) or s.is_relative_to(real):
            raise PabenchError(f"--out {out} overlaps the input folder {src}; pick another --out")


def _swap(new: Path, out: Path) -> None:
    """Put the finished build at `out`; the old site is moved aside first and restored if the
    move fails, so there is always a whole site at `out` or the old one is back."""
    if not out.exists():
        new.rename(out)
        return
    old = out.with_name(f".{out.name}.old-{secrets.token_hex(4)}")
    out.rename(old)
    try:
        new.rename(out)
    except OSError:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _render(site: _Files, tables: list[Table], groups: list[ReportedGroup],
            samples: dict[str, list[Path]], archive_url: str | None) -> None:
    env = environment()
    static = resources.files("pabench.leaderboard") / "static"
    for item in sorted(static.iterdir(), key=lambda i: i.name):
        if item.is_file():
            site.path(f"static/{item.name}").write_bytes(item.read_bytes())

    def render(template: str, path: str, **ctx: object) -> None:
        root = "../" * path.count("/") or "./"
        site.text(path, env.get_template(template).render(
            root=root, version=__version__, archive_url=archive_url, **ctx))

    plots = {t.id: scatter(t) for t in tables if t.shown}
    for t in tables:
        site.table_data(t.id, _table_meta(t), t.rows(), ROW_COLUMNS)
        for e in t.entries:
            copied = []
            for i, src in enumerate(samples[e.id]):
                copied.append(sample_path(e.id, i))
                shutil.copyfile(src, site.path(copied[-1]))
            meta = e.record.submission.meta
            render(
                "entry.html.j2", f"entries/{e.id}.html", table=t, entry=e,
                samples=copied, attribute_rows=_attribute_rows(e), training=_declared(meta),
                credits=_credits(meta), links=entry_links(e), curves=curve_plots(e.record),
            )
    for g in groups:
        meta = {
            "source": g.source, "citation": g.citation.model_dump(), "table": g.table,
            "protocol": g.protocol, "setting": g.setting, "action_dataset": g.action_dataset,
            "privacy_dataset": g.privacy_dataset, "status": "reported",
        }
        site.table_data(g.id, meta, g.rows, REPORTED_COLUMNS)

    specs = [spec for _, spec in PROTOCOLS.items()]
    for spec in specs:
        render(
            "protocol.html.j2", f"protocols/{spec.id}.html", spec=spec, upcoming=NEXT.get(spec.id),
            fields=_flatten(spec.model_dump()),
            tables=[t for t in tables if t.protocol == spec.id],
        )
    render("protocols.html.j2", "protocols.html", specs=specs, tables=tables, upcoming=NEXT,
           agreements=rank_agreement(tables), min_shared=MIN_SHARED)
    render("reported.html.j2", "reported.html", sources=by_source(groups))
    listed = {kind: [t for t in tables if t.listing == kind]
              for kind in ("ranked", "diagnostic", "next", "archived")}
    render("archive.html.j2", "archive.html", tables=listed["archived"],
           upcoming=listed["next"], plots=plots)
    render(
        "index.html.j2", "index.html", ranked=listed["ranked"],
        diagnostic=listed["diagnostic"], upcoming=listed["next"], archived=listed["archived"],
        plots=plots, sources=by_source(groups), calibrations=calibrate(tables, groups),
        calibration_meaning=MEANING, calibration_methods=METHODS,
    )
    site.text(MARKER, "built by `pabench leaderboard build`; rebuilt from scratch\n")


def build_site(results: Path, reported: Path, out: Path,
               archive_url: str | None = None) -> BuildSummary:
    """Build index, archive, entry, protocol and reported pages plus JSON/CSV downloads; the
    index and archive pages link `archive_url`, where older versions' records are archived.

    Every input is read and checked first, the site is rendered into a fresh sibling folder,
    and only a finished build replaces `out`: a bad record, a full disk or a crash leaves the
    previous site as it was.
    """
    results, reported, out = Path(results), Path(reported), Path(os.path.normpath(out))
    if archive_url is not None and not _is_web_url(archive_url):
        raise PabenchError(f"--archive-url {archive_url!r}: must be an http(s) URL")
    _check_out(out, [results, reported])
    tables = build_tables(load_records(results))
    groups: list[ReportedGroup] = load_reported(reported)
    samples = {e.id: sample_files(e.path, e.record) for t in tables for e in t.entries}
    tmp = out.with_name(f".{out.name}.build-{secrets.token_hex(4)}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()  # (not mkdtemp: its 0700 mode would hide the site from a web server)
        _render(_Files(tmp), tables, groups, samples, archive_url)
        _swap(tmp, out)
    except OSError as e:
        raise PabenchError(f"{out}: cannot write the site ({e.strerror or e}"
                           f"{f': {e.filename}' if e.filename else ''})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return BuildSummary(out, len(tables), sum(len(t.entries) for t in tables), len(groups))


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Tests serve many requests; one log line each would bury their output."""


def make_server(site: Path, port: int = 8000, quiet: bool = False) -> ThreadingHTTPServer:
    """An HTTP server for `site` on 127.0.0.1 only (port 0 picks a free one); a bad or busy
    port is a one-line error."""
    site = Path(site)
    if not (site / "index.html").is_file():
        raise PabenchError(f"{site}/index.html not found; run `pabench leaderboard build` first")
    if type(port) is not int or not 0 <= port <= 65535:
        raise PabenchError(f"--port {port}: must be a number from 0 to 65535")
    cls = _QuietHandler if quiet else SimpleHTTPRequestHandler
    try:
        return ThreadingHTTPServer(("127.0.0.1", port), partial(cls, directory=str(site)))
    except OSError as e:
        raise PabenchError(f"cannot serve on 127.0.0.1:{port} ({e.strerror or e})") from None
