"""Hostile records and arguments at every door of records and the leaderboard site.

Each test feeds the bad input through the real path (`read_record`, `write_record`,
`build_site`, `add_records`, the CLI) and checks three things: a one-line error naming the
file, nothing lost (the old site, the existing record), nothing written elsewhere.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError
from test_leaderboard import (
    KNOWN_NOW,
    ROOT,
    TEST_RECORDS,
    _sample_png,
    make_record,
    write_fixture_results,
)
from typer.testing import CliRunner

from pabench.cli import app
from pabench.errors import PabenchError
from pabench.leaderboard import (
    add_records,
    build_site,
    build_tables,
    import_reported,
    load_records,
    make_server,
    pareto_flags,
)
from pabench.leaderboard.scatter import MAX_LABELS, scatter
from pabench.leaderboard.tables import Entry, Table
from pabench.records import (
    MAX_RECORD_BYTES,
    REFERENCES,
    SCHEMA_VERSION,
    Record,
    RecordMeta,
    SubmissionInfo,
    ValidationSummary,
    read_record,
    stored,
    write_record,
)
from pabench.submission import SubmissionMeta

COMMITTED = ROOT / "leaderboard" / "results"
Doc = dict[str, Any]


def _doc(name: str = "unet", protocol: str = "known", version: int = 1) -> Doc:
    """A record as stored, without a raw run (so without a reference file to resolve)."""
    rec = make_record(protocol, version, name)
    return json.loads(stored(rec.model_copy(update={"raw": None, "raw_attackers": []}))[0])


def _write_doc(path: Path, doc: Doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _one_line(e: BaseException, path: Path | str) -> str:
    msg = str(e)
    assert "\n" not in msg and str(path) in msg, msg
    return msg


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _set(path: str, value: object) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value
    return mutate


HOSTILE: dict[str, tuple[Callable[[Doc], None], str]] = {
    "training_data string": (_set("submission.meta.training_data", "imagenet"),
                             "submission.meta.training_data"),
    "training_data list": (_set("submission.meta.training_data", ["imagenet"]),
                           "submission.meta.training_data"),
    "datasets a number": (_set("submission.meta.training_data.datasets", 5),
                          "training_data.datasets"),
    "unknown meta key": (_set("submission.meta.notes", "x"), "submission.meta.notes"),
    "cmap -1e308": (_set("metrics.privacy_cmap", -1e308), "metrics.privacy_cmap"),
    "top-1 above 100": (_set("metrics.action", 1000.0), "metrics.action"),
    "string number": (_set("metrics.action", "99.5"), "metrics.action"),
    "bool number": (_set("metrics.privacy_f1", True), "metrics.privacy_f1"),
    "reversed CI": (_set("metrics.action_ci", [90.0, 80.0]), "lo <= hi"),
    "per-attribute AP 101": (_set("attackers.0.per_attribute.face.ap", 101.0), "per_attribute"),
    "negative epochs": (_set("metrics.target_epochs", -1), "metrics.target_epochs"),
    "future schema": (_set("schema_version", 99), "schema_version 99 is not supported"),
    "schema as string": (_set("schema_version", "1"), "schema_version '1' is not supported"),
    "zero-width name": (_set("submission.name", "identity\u200b"), "submission.name"),
    "markup name": (_set("submission.name", "<b>x</b>"), "submission.name"),
    "short sha256": (_set("submission.sha256", "abc"), "submission.sha256"),
    "unknown format": (_set("submission.format", "pickle"), "submission.format"),
    "huge params": (_set("submission.params", 10**30), "submission.params"),
    "benchmark with '__'": (_set("benchmark.name", "pa__synth"), "benchmark.name"),
    "sample ../": (_set("samples", ["../../etc/x.png"]), "samples.0"),
    "absolute sample": (_set("samples", ["/etc/passwd.png"]), "samples.0"),
    "not a png name": (_set("samples", ["samples/x.svg"]), "samples.0"),
    "negative timing": (_set("timings.total", -1.0), "timings.total"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_record_is_one_line_naming_the_file(case: str, tmp_path: Path) -> None:
    mutate, expected = HOSTILE[case]
    doc = _doc()
    mutate(doc)
    path = _write_doc(tmp_path / "bad.json", doc)
    with pytest.raises(PabenchError) as info:
        read_record(path)
    assert expected in _one_line(info.value, path)


RAW: dict[str, tuple[bytes, str]] = {
    "NaN literal": (b'{"schema_version": 2, "x": NaN}', "NaN is not a valid number"),
    "Infinity literal": (b'{"schema_version": 2, "x": -Infinity}', "-Infinity is not a valid"),
    "overflowing float": (b'{"schema_version": 2, "x": 1e400}', "out of range"),
    "100k-deep nesting": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "duplicate keys": (b'{"schema_version": 2, "schema_version": 1}', "appears twice"),
    "not UTF-8": (b'{"name": "\xff"}', "not UTF-8"),
    "truncated": (b'{"schema_version": 2, "protocol": ', "malformed JSON"),
    "top-level list": (b"[1, 2]", "not a JSON object"),
    "no version": (b"{}", "schema_version None is not supported"),
    "lone surrogate": (b'{"schema_version": 2, "command": "\\ud800"}', "lone surrogate"),
    "5000-digit int": (b'{"schema_version": 2, "seeds": [' + b"9" * 5000 + b"]}", "digits"),
}


@pytest.mark.parametrize("case", sorted(RAW))
def test_hostile_bytes_are_one_line_naming_the_file(case: str, tmp_path: Path) -> None:
    raw, expected = RAW[case]
    if case == "lone surrogate":  # a whole record but for the one string
        raw = json.dumps({**_doc(), "command": "\ud800"}).encode()
    path = tmp_path / "bad.json"
    path.write_bytes(raw)
    with pytest.raises(PabenchError) as info:
        read_record(path)
    assert expected in _one_line(info.value, path)


def test_unreadable_paths_are_one_line(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:  # sparse: no 16 MB written
        f.truncate(MAX_RECORD_BYTES + 1)
    cases = {huge: "too large", tmp_path / "missing.json": "cannot read record",
             tmp_path: "not a regular file"}
    for path, expected in cases.items():
        with pytest.raises(PabenchError) as info:
            read_record(path)
        assert expected in _one_line(info.value, path)


def test_committed_records_are_slim_current_and_build(tmp_path: Path) -> None:
    """The official folder holds each protocol's current (or next) version only, every record
    in the current schema, under 30 kB, naming a reference that is there; it builds."""
    every = sorted(COMMITTED.glob("*.json"))
    assert len(every) >= 130
    docs = {p: json.loads(p.read_text()) for p in every}
    assert {d["schema_version"] for d in docs.values()} == {SCHEMA_VERSION}
    assert max(p.stat().st_size for p in every) <= 30 * 1024
    named = {d["raw_reference"] for d in docs.values()} - {None}
    assert {p.stem for p in (COMMITTED / REFERENCES).iterdir()} == named
    total = sum(p.stat().st_size for p in COMMITTED.rglob("*") if p.is_file())
    assert total <= 15 * 2**20
    tables = build_tables(load_records(COMMITTED))
    assert {t.listing for t in tables} <= {"ranked", "diagnostic", "next"}
    summary = build_site(COMMITTED, ROOT / "leaderboard" / "reported", tmp_path / "site")
    assert summary.entries == len(every)

    def no_constants(c: str) -> None:
        pytest.fail(f"site JSON holds {c}")

    for data in (tmp_path / "site" / "data").glob("*.json"):
        json.loads(data.read_text(), parse_constant=no_constants)


def test_old_schema_records_upgrade(tmp_path: Path) -> None:
    """A v1 record (protocol v1, as the archive holds it) reads as the current schema, and
    written back is a slim current-schema record that reads the same."""
    path = TEST_RECORDS / "pa-synth-tiny__known__identity.json"
    old = json.loads(path.read_text())
    assert old["schema_version"] == 1 and "raw" in old
    record = read_record(path)
    assert record.schema_version == SCHEMA_VERSION and record.submission.replicas == []
    # v3 renamed utility: the upgrade carries the number over unchanged
    assert record.metrics.action == old["metrics"]["action_top1"]
    assert record.metrics.action_metric == "top1" and record.submission.validation is None
    assert write_record(record, tmp_path / "v5.json") is False
    doc = json.loads((tmp_path / "v5.json").read_text())
    assert "raw" not in doc and (tmp_path / REFERENCES / f"{doc['raw_reference']}.json").is_file()
    assert stored(read_record(tmp_path / "v5.json")) == stored(record)


def test_references_are_stored_once_and_checked(tmp_path: Path) -> None:
    """Records of one raw run share one reference file, named by its sha256; a missing or
    changed reference is one line naming the file, and a v5 record may not inline its raw run."""
    a, b = make_record("known", KNOWN_NOW, "unet"), make_record("known", KNOWN_NOW, "black")
    write_record(a, tmp_path / "a.json")
    write_record(b, tmp_path / "b.json")
    [ref] = (tmp_path / REFERENCES).iterdir()
    assert json.loads((tmp_path / "a.json").read_text())["raw_reference"] == ref.stem
    assert stored(read_record(tmp_path / "b.json")) == stored(b)
    text = ref.read_text()
    ref.write_text(text.replace("92.0", "93.0", 1))
    with pytest.raises(PabenchError) as info:
        read_record(tmp_path / "a.json")
    assert "the file was changed" in _one_line(info.value, ref)
    ref.unlink()
    with pytest.raises(PabenchError) as info:
        read_record(tmp_path / "a.json")
    assert "cannot read raw reference" in _one_line(info.value, ref)
    inline = {**json.loads((tmp_path / "a.json").read_text()), "raw": None}
    with pytest.raises(PabenchError) as info:
        read_record(_write_doc(tmp_path / "inline.json", inline))
    assert "raw: a v5 record keeps its raw run" in _one_line(info.value, tmp_path / "inline.json")


def test_stored_numbers_are_rounded_to_what_they_mean(tmp_path: Path) -> None:
    rec = make_record("known", KNOWN_NOW, "unet")
    curve = rec.attackers[0].curves[0].model_copy(update={"train_loss": [0.123456789]})
    rec = rec.model_copy(update={
        "metrics": rec.metrics.model_copy(update={"action": 100 / 3, "action_drop": 1 / 3,
                                                  "privacy_cmap": 56.9499999}),
        "attackers": [rec.attackers[0].model_copy(update={"curves": [curve]})]})
    write_record(rec, tmp_path / "r.json")
    back = read_record(tmp_path / "r.json")
    assert back.metrics.action == 33.3333 and back.metrics.action_drop == 0.333333
    assert back.attackers[0].curves[0].train_loss == [0.1235]
    # 4 decimals would store 56.95, which shows as 57.0: as many more as keep 56.9
    assert back.metrics.privacy_cmap == 56.9499999 and f"{56.95:.1f}" == "57.0"


def test_record_api_round_trip(tmp_path: Path) -> None:
    """What the evaluation engine builds: typed meta with eligibility, a validation summary."""
    rec = make_record("known", 1, "unet")
    sidecar = SubmissionMeta.model_validate({"name": "unet", "license": "MIT",
                                             "training_data": {"datasets": ["kinetics"]}})
    meta = RecordMeta(**sidecar.model_dump(), novel_eligibility="declared-disjoint")
    sub = SubmissionInfo(
        name="unet", sha256="0" * 64, format="torch.export", params=3, flops=None, meta=meta,
        validation=ValidationSummary(seconds_per_clip=0.25, peak_memory_mb=None,
                                     checks=["shape", "range"]))
    rec = rec.model_copy(update={"submission": sub})
    assert write_record(rec, tmp_path / "r.json") is False
    back = read_record(tmp_path / "r.json")
    assert stored(back) == stored(rec) and back.submission.validation.checks == ["shape", "range"]
    assert back.submission.meta.licence == "MIT"
    assert back.submission.meta.training_data.datasets == ["kinetics"]
    with pytest.raises(ValidationError):
        ValidationSummary(seconds_per_clip=float("nan"))
    with pytest.raises(ValidationError):
        SubmissionInfo(name="identity\u200b", sha256="0" * 64, format="baseline", params=0)


def test_never_writes_a_record_it_cannot_read(tmp_path: Path) -> None:
    rec = make_record("known", 1, "unet")
    with pytest.raises(ValidationError):  # the engine's late assignments are checked too
        rec.metrics.action_drop = float("nan")
    bad = rec.model_copy(update={"metrics": rec.metrics.model_copy(
        update={"privacy_cmap": float("inf")})})
    path = tmp_path / "r.json"
    with pytest.raises(PabenchError) as info:
        write_record(bad, path)
    assert "not written" in _one_line(info.value, path)
    assert list(tmp_path.iterdir()) == []


def test_write_record_never_replaces_another_submission_silently(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    mine = make_record("known", 1, "unet")
    assert write_record(mine, path) is False
    assert write_record(mine, path) is True  # same submission: overwritten, and said so
    before = path.read_bytes()
    other = mine.model_copy(update={"submission": mine.submission.model_copy(
        update={"sha256": "cd" * 32})})
    newer = mine.model_copy(update={"protocol": mine.protocol.model_copy(update={"version": 2})})
    for rec in (other, newer):
        with pytest.raises(PabenchError) as info:
            write_record(rec, path)
        msg = _one_line(info.value, path)
        assert "already holds unet (sha256 abababababab" in msg and "--replace" in msg
        assert path.read_bytes() == before
    assert write_record(other, path, replace=True) is True
    assert read_record(path).submission.sha256 == "cd" * 32
    foreign = tmp_path / "notes.json"
    foreign.write_text("my notes")
    with pytest.raises(PabenchError, match="not a record this pabench reads"):
        write_record(mine, foreign)
    assert foreign.read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json", "r.json", REFERENCES]


def test_concurrent_writers_leave_one_intact_record(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    rec = make_record("known", 1, "unet")
    start = threading.Barrier(5)
    errors: list[BaseException] = []
    results: list[bool] = []
    done = threading.Event()

    def writer() -> None:
        start.wait()
        try:
            for _ in range(15):
                results.append(write_record(rec, path))
        except BaseException as e:  # noqa: BLE001 - collected for the assertion below
            errors.append(e)

    def reader() -> None:
        start.wait()
        while not done.is_set():
            if path.exists():
                try:
                    read_record(path)
                except BaseException as e:  # noqa: BLE001
                    errors.append(e)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    watcher = threading.Thread(target=reader)
    for t in [*threads, watcher]:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    assert errors == [] and len(results) == 60
    assert stored(read_record(path)) == stored(rec)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", REFERENCES]
    assert len(list((tmp_path / REFERENCES).iterdir())) == 1  # no temp files left


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    results = write_fixture_results(tmp_path)
    out = tmp_path / "site"
    build_site(results, tmp_path / "none", out)
    return results, out


@pytest.mark.parametrize("case", ["training_data string", "training_data list",
                                  "datasets a number", "cmap -1e308", "sample ../"])
def test_failed_build_keeps_the_old_site(case: str, built: tuple[Path, Path]) -> None:
    results, out = built
    before = _snapshot(out)
    doc = _doc()
    doc["submission"]["name"] = "hostile"
    HOSTILE[case][0](doc)
    bad = _write_doc(results / "zz-hostile.json", doc)
    with pytest.raises(PabenchError) as info:
        build_site(results, results.parent / "none", out)
    _one_line(info.value, bad)
    assert _snapshot(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["results", "site"]  # no leftovers


def test_failed_render_keeps_the_old_site(
    built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after rendering began (here: a full disk) also leaves the old site whole."""
    results, out = built
    before = _snapshot(out)
    import pabench.leaderboard.site as site_mod

    def full_disk(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(site_mod, "scatter", full_disk)
    with pytest.raises(PabenchError, match="No space left on device"):
        build_site(results, results.parent / "none", out)
    assert _snapshot(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["results", "site"]


def test_out_and_results_doors(built: tuple[Path, Path], tmp_path: Path) -> None:
    results, out = built
    before = _snapshot(out)
    link = tmp_path / "link"
    link.symlink_to(out, target_is_directory=True)
    a_file = tmp_path / "file.json"
    a_file.write_text("{}")
    cases = [
        (results, link, f"{link} is a symbolic link"),
        (results, results / "site", "overlaps the input folder"),
        (results, Path("."), "--out .: name the site's own folder"),
        (a_file, tmp_path / "other", f"{a_file}: results folder is not a folder"),
    ]
    for res, dest, expected in cases:
        with pytest.raises(PabenchError) as info:
            build_site(res, tmp_path / "none", dest)
        assert expected in str(info.value) and "\n" not in str(info.value)
    assert link.is_symlink() and _snapshot(out) == before
    assert not (results / "site").exists() and not (tmp_path / "other").exists()
    evil = results / "evil.json"
    evil.symlink_to(next(results.glob("*.json")))
    with pytest.raises(PabenchError, match="is a symbolic link"):
        build_site(results, tmp_path / "none", out)


def _table(*records: Record) -> list[Table]:
    return build_tables((Path(f"{r.submission.name}-{i}.json"), r)
                        for i, r in enumerate(records))


def _rec(name: str, top1: float, cmap: float, fmt: str = "baseline",
         bench: dict[str, str] | None = None) -> Record:
    """`unet`'s record with these scores, every number derived from them agreeing
    (`check_record`): its attackers all reach `cmap`."""
    rec = make_record("known", 1, "unet")
    raw = rec.raw
    assert raw is not None
    m = rec.metrics.model_copy(update={
        "action": top1, "action_ci": (top1, top1), "privacy_cmap": cmap,
        "privacy_cmap_ci": (cmap, cmap), "privacy_cmap_mean": cmap,
        "action_drop": (raw.action - top1) / raw.action,
        "privacy_drop": (raw.privacy_cmap - cmap) / raw.privacy_cmap})
    sub = rec.submission.model_copy(update={"name": name, "format": fmt})
    update: dict[str, object] = {"metrics": m, "submission": sub, "attackers": [
        a.model_copy(update={"cmap": cmap}) for a in rec.attackers]}
    if bench:
        update["benchmark"] = rec.benchmark.model_copy(update=bench)
    return rec.model_copy(update=update)


def test_reference_is_the_identity_baseline_only() -> None:
    impostor = _rec("identity", 99.0, 1.0, fmt="torch.export")
    [table] = _table(impostor, _rec("unet", 80.0, 50.0))
    assert not any(e.is_reference for e in table.entries)
    assert table.reference == impostor.raw  # the records' own raw reference
    with pytest.raises(PabenchError, match="already in table"):
        _table(impostor, _rec("identity", 90.0, 80.0))  # one entry per name and table
    with pytest.raises(PabenchError, match="already in table"):
        _table(_rec("unet", 1.0, 1.0), _rec("UNet", 2.0, 2.0))  # one page on macOS
    [table] = _table(_rec("identity", 90.0, 80.0), _rec("unet", 80.0, 50.0))
    ref = next(e for e in table.entries if e.is_reference)
    assert ref.record.submission.format == "baseline" and table.reference == ref.m


def test_table_and_entry_ids_never_collide(tmp_path: Path) -> None:
    a = _rec("unet", 80.0, 50.0, bench={"name": "pa", "preset": "synth-tiny"})
    b = _rec("unet", 70.0, 40.0, bench={"name": "pa-synth", "preset": "tiny"})
    c = _rec("x__y", 60.0, 30.0)
    tables = _table(a, b, c)
    assert len({t.id for t in tables}) == 2
    entries = [e for t in tables for e in t.entries]
    assert len({e.id.casefold() for e in entries}) == 3
    results = tmp_path / "results"
    for i, r in enumerate((a, b, c)):
        write_record(r, results / f"{i}.json")
    build_site(results, tmp_path / "none", tmp_path / "site")
    data = sorted(p.name for p in (tmp_path / "site" / "data").glob("*.csv"))
    assert data == ["pa-synth__tiny__known__v1.csv", "pa__synth-tiny__known__v1.csv"]
    assert len(list((tmp_path / "site" / "entries").glob("*.html"))) == 3


def test_pareto_is_exact_and_fast() -> None:
    rng = random.Random(0)
    pts = [(float(rng.randint(0, 30)), float(rng.randint(0, 30))) for _ in range(400)]

    def brute(points: list[tuple[float, float]]) -> list[bool]:
        return [not any(a2 >= a and p2 <= p and (a2 > a or p2 < p)
                        for j, (a2, p2) in enumerate(points) if j != i)
                for i, (a, p) in enumerate(points)]

    assert pareto_flags(pts) == brute(pts)
    many = [(rng.uniform(0, 100), rng.uniform(0, 100)) for _ in range(50_000)]
    t0 = time.perf_counter()
    assert sum(pareto_flags(many)) >= 1
    assert time.perf_counter() - t0 < 2.0


def test_thousands_of_entries_plot_quickly() -> None:
    rng = random.Random(1)
    table = Table("t", "pa-synth", "tiny", "known", 1)
    for i in range(3000):
        top1, cmap = rng.uniform(0, 100), rng.uniform(0, 100)
        rec = _rec(f"e{i}", top1, cmap)
        table.entries.append(Entry(record=rec, path=Path(f"{i}.json")))
    t0 = time.perf_counter()
    plot = scatter(table)
    assert time.perf_counter() - t0 < 5.0
    assert len(plot.points) == 3000 and 0 < sum(bool(p.label) for p in plot.points) <= MAX_LABELS


def test_csv_downloads_defuse_formulas(tmp_path: Path) -> None:
    results = tmp_path / "results"
    # above raw data's 90.0: a negative drop, -0.04
    rec = _rec("unet", 93.6, 50.0).model_copy(update={"created": "=HYPERLINK(\"http://x\")"})
    write_record(rec, results / "@SUM(1).json")
    csv = tmp_path / "reported.csv"
    src = pd.read_csv(ROOT / "leaderboard" / "reported" / "paper_results.csv", dtype=str,
                      keep_default_na=False)
    src.head(2).assign(method=["=1+2", "-2+3"], note=["+cmd", "-5"]).to_csv(csv, index=False)
    import_reported(csv, tmp_path / "reported")
    build_site(results, tmp_path / "reported", tmp_path / "site")
    data = tmp_path / "site" / "data"
    [row] = pd.read_csv(data / "pa-synth__tiny__known__v1.csv").to_dict("records")
    assert row["created"] == "'=HYPERLINK(\"http://x\")" and row["record"] == "'@SUM(1).json"
    assert row["action_drop"] == -0.04  # a negative number stays a number
    assert json.loads((data / "pa-synth__tiny__known__v1.json").read_text())["rows"][0][
        "created"].startswith("=")  # JSON is data, not a spreadsheet: unchanged
    reported = [p for p in data.glob("reported-*.csv")]
    rows = [r for p in reported for r in pd.read_csv(p, dtype=str).to_dict("records")]
    assert {r["method"] for r in rows} == {"'=1+2", "'-2+3"}
    assert {r["note"] for r in rows} == {"'+cmd", "-5"}


def test_entry_page_escapes_metadata(tmp_path: Path) -> None:
    rec = _rec("unet", 80.0, 50.0)
    meta = rec.submission.meta.model_copy(update={
        "authors": ["<img src=x onerror=alert(1)>"], "licence": "<b>MIT</b>",
        "paper_url": 'https://example.org/" onmouseover="alert(1)'})
    rec = rec.model_copy(update={"submission": rec.submission.model_copy(update={"meta": meta})})
    write_record(rec, tmp_path / "results" / "r.json")
    build_site(tmp_path / "results", tmp_path / "none", tmp_path / "site")
    [page] = (tmp_path / "site" / "entries").glob("*.html")
    html = page.read_text()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<b>MIT</b>" not in html
    assert 'href="https://example.org/&#34; onmouseover=&#34;alert(1)"' in html
    assert "Content-Security-Policy" in html


def test_serve_doors_are_one_line(built: tuple[Path, Path]) -> None:
    _, out = built
    with pytest.raises(PabenchError, match="--port 70000: must be a number from 0 to 65535"):
        make_server(out, 70000)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        port = busy.getsockname()[1]
        with pytest.raises(PabenchError, match=f"cannot serve on 127.0.0.1:{port}"):
            make_server(out, port)
        cli = Path(sys.executable).parent / "pabench"
        proc = subprocess.run([str(cli), "leaderboard", "serve", "--site", str(out), "--port",
                               str(port)], capture_output=True, text=True, timeout=120)
    finally:
        busy.close()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: cannot serve on 127.0.0.1:{port} (Address already in use)"]


def _user_record(tmp_path: Path, name: str = "newcomer", sha: str = "cd" * 32,
                 sample: str = "samples/mine.png") -> Path:
    """A record as `pabench evaluate` leaves it in a user's folder, with its sample strip."""
    rec = _rec(name, 85.0, 40.0).model_copy(update={"samples": [sample]})
    rec.submission.sha256 = sha
    folder = tmp_path / "user"
    _sample_png(folder / sample)
    path = folder / f"{rec.entry_id}.json"
    write_record(rec, path, replace=True)
    return path


def test_add_copies_record_and_sample(tmp_path: Path) -> None:
    results = write_fixture_results(tmp_path)
    victim = results / "samples" / "pa-synth-tiny__known__v1__downsample-4x.png"
    before_victim = victim.read_bytes()
    src = _user_record(tmp_path, sample=victim.relative_to(results).as_posix())
    _sample_png(src.parent / "samples" / "other.png")
    shutil.copy(src.parent / "samples" / "other.png", src.parent / victim.relative_to(results))
    runner = CliRunner()
    res = runner.invoke(app, ["leaderboard", "add", str(src), "--results", str(results)])
    assert res.exit_code == 0, res.output
    dest = results / "pa-synth__tiny__known__v1__newcomer.json"
    assert res.output.startswith(f"added {dest} from {src}")
    added = read_record(dest)
    assert added.samples == [f"samples/{dest.stem}.png"]
    assert (results / added.samples[0]).read_bytes() == (
        src.parent / victim.relative_to(results)).read_bytes()
    assert victim.read_bytes() == before_victim  # same sample name, another entry: untouched
    res = runner.invoke(app, ["leaderboard", "add", str(src), "--results", str(results)])
    assert res.exit_code == 0 and res.output.startswith(f"replaced {dest}")
    tables = build_tables(load_records(results))
    assert len(next(t for t in tables if t.version == 1).entries) == 6


def test_add_never_replaces_an_official_record_silently(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(COMMITTED, results)
    before = _snapshot(results)
    name = f"pa-synth__tiny__known__v{KNOWN_NOW}__identity.json"
    official = read_record(results / name)
    rec = official.model_copy(update={"submission": official.submission.model_copy(
        update={"sha256": "ee" * 32, "format": "torch.export"})})
    _sample_png(tmp_path / "user" / rec.samples[0])
    src = tmp_path / "user" / "mine.json"
    write_record(rec, src)
    res = CliRunner().invoke(app, ["leaderboard", "add", str(src), "--results", str(results)])
    assert isinstance(res.exception, PabenchError)
    msg = _one_line(res.exception, results / name)
    assert "already holds identity (sha256" in msg and "--replace" in msg
    assert _snapshot(results) == before
    [added] = add_records([src], results, replace=True)
    assert added.replaced and added.path.name == name
    assert read_record(added.path).submission.sha256 == "ee" * 32


@pytest.mark.parametrize("case", ["outside link", "not png", "same entry twice", "bad second",
                                  "another entry's sample", "case twin"])
def test_refused_add_writes_nothing(case: str, tmp_path: Path) -> None:
    results = write_fixture_results(tmp_path)
    before = _snapshot(results)
    src = _user_record(tmp_path)
    sources = [src]
    if case == "outside link":
        secret = tmp_path / "secret.png"
        _sample_png(secret)
        png = src.parent / "samples/mine.png"
        png.unlink()
        png.symlink_to(secret)
        expected = "lies outside the record's folder"
    elif case == "not png":
        (src.parent / "samples/mine.png").write_bytes(b"GIF89a")
        expected = "is not a PNG"
    elif case == "same entry twice":
        sources = [src, src]
        expected = "same entry as"
    elif case == "bad second":
        bad = src.parent / "bad.json"
        bad.write_text('{"schema_version": 2, "metrics": {"action_top1": NaN}}')
        sources = [src, bad]
        expected = "NaN is not a valid number"
    elif case == "another entry's sample":
        # an existing record already uses the file name the newcomer's strip would get
        squatter = _rec("squatter", 1.0, 1.0).model_copy(update={
            "samples": ["samples/pa-synth__tiny__known__v1__newcomer.png"]})
        _sample_png(results / squatter.samples[0])
        write_record(squatter, results / "squatter.json")
        before = _snapshot(results)
        expected = "which belongs to"
    else:
        write_record(_rec("Newcomer", 1.0, 1.0), results / "twin.json")
        before = _snapshot(results)
        expected = "already holds Newcomer"
    with pytest.raises(PabenchError) as info:
        add_records(sources, results)
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert _snapshot(results) == before


def test_add_refuses_records_of_uncommitted_code(tmp_path: Path) -> None:
    results = write_fixture_results(tmp_path)
    before = _snapshot(results)
    src = _user_record(tmp_path)
    rec = read_record(src)
    write_record(rec.model_copy(update={"pabench": {**rec.pabench, "git": "0123abc-dirty"}}),
                 src, replace=True)
    with pytest.raises(PabenchError) as info:
        add_records([src], results)
    assert "uncommitted code (git 0123abc-dirty)" in _one_line(info.value, src)
    assert _snapshot(results) == before


def test_add_into_a_file_is_one_line(tmp_path: Path) -> None:
    src = _user_record(tmp_path)
    not_a_folder = tmp_path / "results"
    not_a_folder.write_text("x")
    with pytest.raises(PabenchError) as info:
        add_records([src], not_a_folder)
    assert "results folder is not a folder" in _one_line(info.value, not_a_folder)
    assert not_a_folder.read_text() == "x"


def test_results_stay_where_they_are(tmp_path: Path) -> None:
    """Nothing under the working directory is written by a build or an add elsewhere."""
    cwd = Path.cwd()
    before = set(os.listdir(cwd))
    results = write_fixture_results(tmp_path)
    add_records([_user_record(tmp_path)], results)
    build_site(results, tmp_path / "none", tmp_path / "site")
    assert set(os.listdir(cwd)) == before
