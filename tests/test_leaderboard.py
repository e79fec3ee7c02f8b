"""The leaderboard site: tables, Pareto fronts, downloads, reported numbers, escaping, errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from pabench.errors import PabenchError
from pabench.leaderboard import (
    build_site,
    build_tables,
    import_reported,
    load_records,
    load_reported,
    make_server,
    pareto_flags,
)
from pabench.protocols import PROTOCOLS
from pabench.records import AttackerResult, Metrics, Record, write_record

XSS = "<script>alert(1)</script>"
XSS_ENTRY = "scripted"  # names are ASCII words; its authors and command carry the markup
ATTRS = ("face", "gender", "skin", "relationship")
SHARED_REPORTED = Path(__file__).resolve().parents[2] / "shared" / "reported" / "paper_results.csv"
ROOT = Path(__file__).resolve().parents[1]

# (protocol, version) -> entry -> (action top-1, worst-case privacy cMAP)
FIXTURE: dict[tuple[str, int], dict[str, tuple[float, float]]] = {
    ("known", 1): {
        "identity": (90.0, 80.0),
        "unet": (88.0, 55.0),
        "downsample-4x": (80.0, 50.0),
        "box-blur-face": (85.0, 70.0),
        XSS_ENTRY: (70.0, 65.0),
    },
    ("known", 2): {"identity": (92.0, 85.0), "downsample-4x": (70.0, 75.0)},
    ("cross-dataset", 1): {"identity": (75.0, 60.0), "downsample-4x": (61.0, 41.0)},
}
PARETO_KNOWN_V1 = {"identity", "unet", "downsample-4x"}


def _metrics(top1: float, cmap: float, raw: tuple[float, float] | None) -> Metrics:
    return Metrics(
        action_top1=top1, action_top1_ci=(top1 - 2.0, top1 + 1.5), action_top1_clip=top1 - 3,
        privacy_cmap=cmap, privacy_cmap_ci=(cmap - 2.5, cmap + 2.0),
        privacy_f1=cmap * 0.8, privacy_f1_ci=(cmap * 0.8 - 3, cmap * 0.8 + 3),
        privacy_cmap_mean=cmap - 4, privacy_f1_mean=cmap * 0.8 - 4, worst_attacker="tiny2d",
        action_drop=None if raw is None else (raw[0] - top1) / raw[0],
        privacy_drop=None if raw is None else (raw[1] - cmap) / raw[1],
        excluded_attributes=["relationship"], target_epochs=12,
    )


def _attackers(cmap: float) -> list[AttackerResult]:
    return [
        AttackerResult(
            arch=arch, cmap=cmap - i * 3, f1=(cmap - i * 3) * 0.8, epochs=10 + i,
            per_attribute={a: {"ap": cmap - i - j, "f1": cmap * 0.7 - j} for j, a in
                           enumerate(ATTRS)},
        )
        for i, arch in enumerate(("tiny2d", "tiny-resnet2d", "mobilenet_v3_small"))
    ]


def _sample_png(path: Path) -> None:
    """A strip of 4 raw frames over the same 4 frames pixelated, as the evaluator writes it."""
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 255, (32, 32 * 4, 3), dtype=np.uint8)
    anon = np.kron(raw[::4, ::4], np.ones((4, 4, 1), dtype=np.uint8))
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.concatenate([raw, anon])).save(path)


def make_record(protocol: str, version: int, name: str, with_sample: bool = False) -> Record:
    top1, cmap = FIXTURE[(protocol, version)][name]
    raw = FIXTURE[(protocol, version)]["identity"]
    key = f"pa-synth-tiny__{protocol}__v{version}__{name}"
    return Record(
        pabench={"version": "0.1.0", "git": "0123abc"},
        protocol={"id": protocol, "version": version},
        benchmark={"name": "pa-synth", "preset": "tiny",
                   "fingerprints": {"synth-pa": "f" * 16, "synth-action": "a" * 16}},
        submission={
            "name": name, "sha256": "ab" * 32, "format": "baseline",
            "params": 0 if name == "identity" else 1_234_567, "flops": 2_000_000,
            "meta": {"training_data": {"datasets": ["synth-action"], "action_classes": ["walk"],
                                       "attributes": ["face"]}, "paper_url": "javascript:x()",
                     "authors": [XSS] if name == XSS_ENTRY else ["A. Author"]},
        },
        metrics=_metrics(top1, cmap, raw),
        attackers=_attackers(cmap),
        raw=_metrics(*raw, raw),
        raw_attackers=_attackers(raw[1]),
        seeds=[0, 1],
        hardware={"cpu": "2 cores", "torch": "2.9"},
        timings={"anonymize": 1.5, "total": 42.0},
        created="2025-01-01T00:00:00+00:00",
        command=f"pabench evaluate {name} --protocol {protocol} --preset tiny"
        + (f" # {XSS}" if name == XSS_ENTRY else ""),
        samples=[f"samples/{key}.png"] if with_sample else [],
    )


def write_fixture_results(root: Path) -> Path:
    """Records of three tables (two versions of `known`) plus one sample strip, under root."""
    results = root / "results"
    for (protocol, version), entries in FIXTURE.items():
        for name in entries:
            with_sample = (protocol, version, name) == ("known", 1, "downsample-4x")
            rec = make_record(protocol, version, name, with_sample)
            key = f"pa-synth-tiny__{protocol}__v{version}__{name}"
            if with_sample:
                _sample_png(results / rec.samples[0])
            write_record(rec, results / f"{key}.json")
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fixture_results(tmp_path_factory.mktemp("lb"))


@pytest.fixture(scope="module")
def reported() -> Path:
    return ROOT / "leaderboard" / "reported"


@pytest.fixture(scope="module")
def site(results: Path, reported: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    build_site(results, reported, out)
    return out


def _tables(results: Path) -> dict[tuple[str, int], dict[str, object]]:
    return {(t.protocol, t.version): t for t in build_tables(load_records(results))}


def test_pareto_flags() -> None:
    pts = [(90, 80), (88, 55), (80, 50), (85, 70), (70, 65), (80, 50)]
    # ties are not dominated (no strict improvement), a worse-on-both point is
    assert pareto_flags(pts) == [True, True, True, False, False, True]
    assert pareto_flags([(50, 50)]) == [True]
    assert pareto_flags([(50, 50), (50, 40)]) == [False, True]


def test_tables_never_mix_protocols_or_versions(results: Path) -> None:
    tables = _tables(results)
    assert set(tables) == set(FIXTURE)
    for key, t in tables.items():
        assert {e.name for e in t.entries} == set(FIXTURE[key])
        assert len({(e.record.protocol.id, e.record.protocol.version) for e in t.entries}) == 1
    known1 = tables[("known", 1)]
    assert {e.name for e in known1.entries if e.pareto} == PARETO_KNOWN_V1
    # v2's downsample-4x (70, 75) would be dominated by v1 entries; within v2 it is optimal
    assert all(e.pareto for e in tables[("known", 2)].entries)
    assert not tables[("known", 2)].current and known1.current
    assert [e.m.action_top1 for e in known1.entries] == sorted(
        (v[0] for v in FIXTURE[("known", 1)].values()), reverse=True)


def test_downloads_match_records(site: Path, results: Path) -> None:
    for (protocol, version), t in _tables(results).items():
        csv = pd.read_csv(site / "data" / f"{t.id}.csv")
        doc = json.loads((site / "data" / f"{t.id}.json").read_text())
        assert doc["protocol"] == protocol and doc["protocol_version"] == version
        assert doc["raw_reference"]["action_top1"] == FIXTURE[(protocol, version)]["identity"][0]
        assert len(csv) == len(doc["rows"]) == len(FIXTURE[(protocol, version)])
        for row, jrow in zip(csv.to_dict("records"), doc["rows"], strict=True):
            rec = next(e.record for e in t.entries if e.name == row["entry"])
            assert jrow["entry"] == row["entry"]
            assert (row["action_top1"], row["privacy_cmap"]) == FIXTURE[(protocol, version)][
                row["entry"]]
            assert row["privacy_f1"] == pytest.approx(rec.metrics.privacy_f1)
            assert row["action_top1_ci_lo"] == rec.metrics.action_top1_ci[0]
            assert jrow["action_drop"] == rec.metrics.action_drop
            assert row["params"] == rec.submission.params
            assert row["pareto_optimal"] == jrow["pareto_optimal"]
            assert row["status"] == "verified"


def test_pages_exist_and_escape(site: Path, results: Path) -> None:
    for pid, _ in PROTOCOLS.items():
        assert (site / "protocols" / f"{pid}.html").is_file()
    xss = next(e for e in _tables(results)[("known", 1)].entries if e.name == XSS_ENTRY)
    assert xss.id == "pa-synth__tiny__known__v1__scripted"
    entry = (site / "entries" / f"{xss.id}.html").read_text()
    assert XSS not in entry
    assert entry.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2  # authors, command
    assert 'href="javascript:' not in entry  # metadata URLs become links only when http(s)
    assert "javascript:x()" in entry  # shown as text
    samples = list((site / "samples").glob("*.png"))
    assert len(samples) == 1 and Image.open(samples[0]).size == (128, 64)


def test_autoescape_is_on() -> None:
    from pabench.leaderboard.site import environment

    env = environment()
    assert env.from_string("{{ x }}").render(x="<b>&") == "&lt;b&gt;&amp;"
    assert env.get_template("index.html.j2").environment.autoescape is True


def test_reported_kept_apart(site: Path, reported: Path) -> None:
    groups = load_reported(reported)
    assert groups and all(len({r["source"] for r in g.rows}) == 1 for g in groups)
    assert all(len({r["setting"] for r in g.rows}) == 1 for g in groups)
    index = (site / "index.html").read_text()
    assert "badge-reported" not in index  # verified tables hold no reported rows
    page = (site / "reported.html").read_text()
    assert "badge-verified" not in page and "badge-pareto" not in page
    assert page.count("<table") == len(groups)
    for g in groups:
        doc = json.loads((site / "data" / f"{g.id}.json").read_text())
        assert doc["citation"]["title"] and len(doc["rows"]) == len(g.rows)


def test_vendored_reported_matches_shared() -> None:
    vendored = ROOT / "leaderboard" / "reported" / "paper_results.csv"
    if not SHARED_REPORTED.is_file():
        pytest.skip(f"{SHARED_REPORTED} is absent")
    assert vendored.read_bytes() == SHARED_REPORTED.read_bytes()


def test_import_reported_validates(tmp_path: Path) -> None:
    src = ROOT / "leaderboard" / "reported" / "paper_results.csv"
    written = import_reported(src, tmp_path / "out")
    assert [p.name for p in written] == ["paper_results.csv", "citations.json"]
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    bad = tmp_path / "bad.csv"
    df.head(3).assign(action=["62.3", "620.3", "1"]).to_csv(bad, index=False)
    with pytest.raises(PabenchError, match=r"bad\.csv:3: 'action' must be a number in \[0, 100\]"):
        import_reported(bad, tmp_path / "x")
    unknown = tmp_path / "unknown.csv"
    df.head(2).assign(source="Someone (2030)").to_csv(unknown, index=False)
    with pytest.raises(PabenchError, match=r"no citation for source\(s\) Someone \(2030\)"):
        import_reported(unknown, tmp_path / "y")
    df.head(2).drop(columns="note").to_csv(bad, index=False)
    with pytest.raises(PabenchError, match="columns must be"):
        import_reported(bad, tmp_path / "z")


def test_malformed_record_is_one_line_naming_the_file(results: Path, tmp_path: Path) -> None:
    broken = tmp_path / "results"
    shutil.copytree(results, broken)
    bad = broken / "zz-broken.json"
    bad.write_text('{"schema_version": 1, "protocol": ')
    with pytest.raises(PabenchError) as info:
        build_site(broken, tmp_path / "none", tmp_path / "site")
    assert str(bad) in str(info.value) and "\n" not in str(info.value)
    cli = Path(sys.executable).parent / "pabench"
    proc = subprocess.run(
        [str(cli), "leaderboard", "build", "--results", str(broken), "--out",
         str(tmp_path / "site2")], capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "zz-broken.json" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_missing_sample_is_an_error_and_keeps_the_old_site(
    results: Path, tmp_path: Path
) -> None:
    build_site(results, tmp_path / "none", tmp_path / "site")
    broken = tmp_path / "results"
    shutil.copytree(results, broken)
    for png in (broken / "samples").glob("*.png"):
        png.unlink()
    with pytest.raises(PabenchError, match="sample 'samples/.*' not found"):
        build_site(broken, tmp_path / "none", tmp_path / "site")
    assert len(list((tmp_path / "site" / "samples").glob("*.png"))) == 1


def test_rebuild_is_reproducible_and_safe(results: Path, reported: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    build_site(results, reported, a)
    build_site(results, reported, b)
    build_site(results, reported, b)  # rebuilding over its own output is fine
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files_a)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(PabenchError, match="not built by pabench"):
        build_site(results, reported, foreign)
    assert (foreign / "keep.txt").exists()


def test_empty_results_build(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    summary = build_site(tmp_path / "results", tmp_path / "none", tmp_path / "site")
    assert summary.tables == 0 and "No verified results yet" in (
        tmp_path / "site" / "index.html").read_text()


def test_serve_binds_loopback(site: Path) -> None:
    server = make_server(site, 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert server.server_address[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{server.server_port}/index.html"
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200 and b"leaderboard" in resp.read()
    finally:
        server.shutdown()
        server.server_close()


def test_scatter_labels_never_overprint():
    from pabench.leaderboard.scatter import CHAR_PX, LABEL_PX, Point, _overlaps, _place_labels

    def pt(x: float, y: float, name: str, pareto: bool = False) -> Point:
        return Point(x, y, x, x, y, y, name, name, name, pareto, False)

    crowd = [pt(200 + i, 100 + i, f"entry-{i}", pareto=i == 7) for i in range(8)]
    placed = _place_labels(crowd, (0, 0, 600, 400), [])
    boxes = []
    for p in placed:
        if p.label:
            w = len(p.label) * CHAR_PX
            x0 = {"start": p.label_x, "end": p.label_x - w, "middle": p.label_x - w / 2}[p.anchor]
            boxes.append((x0, p.label_y - LABEL_PX + 2, x0 + w, p.label_y + 3))
    assert placed[7].label == "entry-7"  # Pareto entries are labelled first
    assert 2 <= len(boxes) < 8  # a crowd cannot all be labelled; the rest keep tooltips
    assert not any(_overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_multilabel_utility_is_labelled_cmap(tmp_path):
    rec = make_record("known", 1, "identity")
    rec = rec.model_copy(update={"metrics": rec.metrics.model_copy(
        update={"action_metric": "cmap"})})
    write_record(rec, tmp_path / "results" / "r.json")
    tables = build_tables(load_records(tmp_path / "results"))
    assert tables[0].action_metric == "cMAP"
    build_site(tmp_path / "results", tmp_path / "none", tmp_path / "site")
    html = (tmp_path / "site" / "index.html").read_text()
    assert "Action cMAP ↑" in html and "action cMAP (%)" in html and "Action top" not in html
