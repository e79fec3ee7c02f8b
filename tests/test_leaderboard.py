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
from typer.testing import CliRunner

from pabench.cli import app
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
from pabench.leaderboard.agreement import rank_agreement, spearman
from pabench.leaderboard.ranking import tie_ranks
from pabench.leaderboard.summary import late_gain
from pabench.leaderboard.tables import Table
from pabench.protocols import NEXT, PROTOCOLS
from pabench.records import (
    AttackerResult,
    Consistency,
    Curve,
    Metrics,
    Record,
    Replica,
    write_record,
)
from pabench.training.methods import default_recipe

XSS = "<script>alert(1)</script>"
XSS_ENTRY = "scripted"  # names are ASCII words; its authors and command carry the markup
ATTRS = ("face", "gender", "skin", "relationship")
SHARED_REPORTED = Path(__file__).resolve().parents[2] / "shared" / "reported" / "paper_results.csv"
ROOT = Path(__file__).resolve().parents[1]
TEST_RECORDS = Path(__file__).resolve().parent / "records"  # records of older schemas

KNOWN_NOW = PROTOCOLS.get("known").version
RAW_NOW = PROTOCOLS.get("raw-pretrained-attacker").version
# (protocol, version) -> entry -> (action score, worst-case privacy cMAP). Protocol v1 tables
# are archived; known's current version is ranked, raw-pretrained-attacker's is a diagnostic.
FIXTURE: dict[tuple[str, int], dict[str, tuple[float, float]]] = {
    ("known", 1): {
        "identity": (90.0, 80.0),
        "unet": (88.0, 55.0),
        "downsample-4x": (80.0, 50.0),
        "box-blur-face": (85.0, 70.0),
        XSS_ENTRY: (70.0, 65.0),
    },
    ("known", KNOWN_NOW): {
        "identity": (92.0, 85.0),
        "downsample-4x": (70.0, 75.0),
        "unet": (85.0, 60.0),
        "box-blur-face": (80.0, 61.0),  # CI overlaps unet's: the two share ranks 1-2
        "memorizer": (90.0, 20.0),  # failed the consistency check: never ranked
        "black": (12.5, 30.0),  # a control at chance: shown, never ranked or on the front
    },
    ("cross-dataset", 1): {"identity": (75.0, 60.0), "downsample-4x": (61.0, 41.0)},
    ("raw-pretrained-attacker", RAW_NOW): {
        "identity": (75.0, 60.0),
        "downsample-4x": (61.0, 41.0),
        "invert": (75.0, 52.0),
        "channel-permute": (74.0, 54.0),
    },
}
PARETO_KNOWN = {"unet"}
RANKS_KNOWN = {"unet": (1, 2), "box-blur-face": (1, 2), "downsample-4x": (3, 3),
               "identity": None, "black": None}
UNRANKED = "memorizer"
MEMORIZER_FLAG = "consistency check failed: train-vs-test AUC 93.0 above 60.0"
BASE_CMAP = 30.0
COMMITMENT = "c0" * 32
ATTACKERS = ("tiny2d", "tiny-resnet2d", "tiny-c3d")
WEAK = "tiny-c3d"


def _current(protocol: str, version: int) -> bool:
    return PROTOCOLS.get(protocol).version == version


def _metrics(top1: float, cmap: float, raw: tuple[float, float] | None,
             current: bool = False) -> Metrics:
    m = Metrics(
        action=top1, action_ci=(top1 - 2.0, top1 + 1.5), action_clip=top1 - 3,
        privacy_cmap=cmap, privacy_cmap_ci=(cmap - 2.5, cmap + 2.0),
        privacy_f1=cmap * 0.8, privacy_f1_ci=(cmap * 0.8 - 3, cmap * 0.8 + 3),
        privacy_cmap_mean=cmap - 3, privacy_f1_mean=cmap * 0.8 - 2.4, worst_attacker="tiny2d",
        action_drop=None if raw is None else (raw[0] - top1) / raw[0],
        privacy_drop=None if raw is None else (raw[1] - cmap) / raw[1],
        excluded_attributes=["relationship"], target_epochs=12,
    )
    if current and raw is not None:  # what protocol v2 adds
        norm = (cmap - BASE_CMAP) / (raw[1] - BASE_CMAP)
        m = m.model_copy(update=dict(
            base_cmap=BASE_CMAP, privacy_norm=norm, privacy_norm_ci=(norm - 0.05, norm + 0.04),
            action_chance=12.5, attributes=list(ATTRS[:3]),
            target_curves=[_curve(s, top1) for s in (0, 1, 2)],
            ci_method="videos+seeds, max inside",
        ))
    return m


def _curve(seed: int, top: float, chosen: bool = True) -> Curve:
    """A run that rises and levels off; an attempt replaced by a retry peaks at epoch 1."""
    n = 14 if chosen else 6
    score = [top * (1 - 0.7 ** (i + 1)) for i in range(n)] if chosen else [top / 2] * n
    return Curve(seed=seed, lr=2e-3, epochs=n, best_epoch=10 if chosen else 1,
                 train_loss=[1 / (i + 1) for i in range(n)],
                 val_loss=[1.2 / (i + 1) for i in range(n)], val_score=score, chosen=chosen)


def _attackers(cmap: float, current: bool = False) -> list[AttackerResult]:
    out = []
    for i, arch in enumerate(ATTACKERS if current else
                             ("tiny2d", "tiny-resnet2d", "mobilenet_v3_small")):
        a = AttackerResult(
            arch=arch, cmap=cmap - i * 3, f1=(cmap - i * 3) * 0.8, epochs=10 + i,
            per_attribute={attr: {"ap": cmap - i - j, "f1": cmap * 0.7 - j} for j, attr in
                           enumerate(ATTRS)},
        )
        if current:
            curves = [_curve(s, cmap) for s in (0, 1, 2)]
            if i == 0:  # seed 0 first stopped early and was retried at a lower LR
                curves.insert(0, _curve(0, cmap, chosen=False))
                curves[1] = curves[1].model_copy(update={"lr": 5e-4})
            a = a.model_copy(update=dict(
                cmap_per_seed=[cmap - i * 3 - 1, cmap - i * 3, cmap - i * 3 + 1],
                curves=curves, raw_cmap=88.0 - i * 10 - (25 if arch == WEAK else 0),
                strong=arch != WEAK,
            ))
        out.append(a)
    return out


def _sample_png(path: Path) -> None:
    """A strip of 4 raw frames over the same 4 frames pixelated, as the evaluator writes it."""
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 255, (32, 32 * 4, 3), dtype=np.uint8)
    anon = np.kron(raw[::4, ::4], np.ones((4, 4, 1), dtype=np.uint8))
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.concatenate([raw, anon])).save(path)


def make_record(protocol: str, version: int, name: str, with_sample: bool = False) -> Record:
    """A record as the engine writes it; under a current protocol with every v3 field."""
    top1, cmap = FIXTURE[(protocol, version)][name]
    raw = FIXTURE[(protocol, version)]["identity"]
    key = f"pa-synth-tiny__{protocol}__v{version}__{name}"
    rec = Record(
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
    if not _current(protocol, version):
        return rec
    diagnostic = PROTOCOLS.get(protocol).role == "diagnostic"
    memorizer = name == UNRANKED
    flags = [f"weak attacker: {WEAK} (raw cMAP 53.0, 25.0 below the strongest)"]
    return rec.model_copy(update=dict(
        metrics=_metrics(top1, cmap, raw, current=True),
        attackers=_attackers(cmap, current=True),
        raw=_metrics(*raw, raw, current=True),
        raw_attackers=_attackers(raw[1], current=True),
        seeds=[0, 1, 2],
        benchmark=rec.benchmark.model_copy(update=dict(
            generator_version=2, test_seed="public" if memorizer else "private",
            test_seed_commitment=None if memorizer else COMMITMENT)),
        consistency=None if diagnostic else Consistency(
            model="tiny3d", auc=93.0 if memorizer else 51.0,
            auc_ci=(90.0, 95.0) if memorizer else (47.0, 55.0), threshold=60.0,
            passed=not memorizer),
        ranked=not (memorizer or diagnostic),
        submission=rec.submission.model_copy(update=dict(
            meta=rec.submission.meta.model_copy(update=dict(trained_on=TRAINED_ON,
                                                            training_recipe=RECIPE)),
            training_seed=4, replicas=[Replica(seed=k, sha256=f"{k}" * 64, training_seed=4 + k,
                                               trained_on={**TRAINED_ON, "threads": str(k)})
                                       for k in (1, 2)])) if name == "unet" else rec.submission,
        flags=flags + ([MEMORIZER_FLAG] if memorizer else [])
        + (["diagnostic protocol"] if diagnostic else []),
    ))


TRAINED_ON = {"cpu": "Fixture CPU", "device": "cpu", "threads": "1"}
RECIPE = {"method": "vita-kbeam", "seed": 4, "steps": 600,
          "budget_models": ["tiny-vgg2d", "tiny-dws2d"]}


def write_fixture_results(root: Path) -> Path:
    """Records of four tables (two versions of `known`, a diagnostic) plus one sample strip."""
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


def _tables(results: Path) -> dict[tuple[str, int], Table]:
    return {(t.protocol, t.version): t for t in build_tables(load_records(results))}


def _section(html: str, start: str, end: str = "</section>") -> str:
    """The part of a page from `start` to the next `end` (an assertion if `start` is absent)."""
    assert start in html, start
    tail = html[html.index(start):]
    return tail[:tail.index(end)]


def test_pareto_flags() -> None:
    pts = [(90, 80), (88, 55), (80, 50), (85, 70), (70, 65), (80, 50)]
    # ties are not dominated (no strict improvement), a worse-on-both point is
    assert pareto_flags(pts) == [True, True, True, False, False, True]
    assert pareto_flags([(50, 50)]) == [True]
    assert pareto_flags([(50, 50), (50, 40)]) == [False, True]


def test_tie_ranks() -> None:
    # no CI overlaps: plain ranks, whatever the input order
    assert tie_ranks([30.0, 10.0, 20.0], [(29, 31), (9, 11), (19, 21)]) == [(3, 3), (1, 1),
                                                                             (2, 2)]
    # a overlaps b, b overlaps c, a does not overlap c: b spans all three
    assert tie_ranks([10.0, 12.0, 14.0], [(9, 11.5), (11, 13), (12.5, 15)]) == [
        (1, 2), (1, 3), (2, 3)]
    # touching intervals overlap; equal scores tie even with empty-width CIs apart
    assert tie_ranks([1.0, 2.0, 5.0], [(0, 2), (2, 3), (5, 5)]) == [(1, 2), (1, 2), (3, 3)]
    assert tie_ranks([4.0, 4.0], [(4, 4), (4, 4)]) == [(1, 2), (1, 2)]
    assert tie_ranks([], []) == []


def test_tables_never_mix_protocols_or_versions(results: Path) -> None:
    tables = _tables(results)
    assert set(tables) == set(FIXTURE)
    for key, t in tables.items():
        assert {e.name for e in t.entries} == set(FIXTURE[key])
        assert len({(e.record.protocol.id, e.record.protocol.version) for e in t.entries}) == 1
    listing = {key: t.listing for key, t in tables.items()}
    assert listing == {("known", 1): "archived", ("cross-dataset", 1): "archived",
                       ("known", KNOWN_NOW): "ranked",
                       ("raw-pretrained-attacker", RAW_NOW): "diagnostic"}
    known_now = tables[("known", KNOWN_NOW)]
    assert known_now.current and not tables[("known", 1)].current
    assert {e.name for e in known_now.entries if e.pareto} == PARETO_KNOWN
    assert {e.name: e.rank for e in known_now.shown} == RANKS_KNOWN
    # ranked tables order by privacy, best first; the CI-tied pair reads "1–2"; the controls
    # and the raw reference are shown in place, unranked
    assert [e.name for e in known_now.shown] == ["black", "unet", "box-blur-face",
                                              "downsample-4x", "identity"]
    assert [e.rank_text for e in known_now.shown] == ["", "1–2", "1–2", "3", ""]
    # archived and diagnostic tables rank nothing and mark no Pareto front
    for key in (("known", 1), ("cross-dataset", 1), ("raw-pretrained-attacker", RAW_NOW)):
        assert all(e.rank is None and not e.pareto for e in tables[key].entries)
        assert tables[key].shown == tables[key].entries and tables[key].unranked == []


def test_unranked_records_are_listed_not_ranked(results: Path, site: Path) -> None:
    known_now = _tables(results)[("known", KNOWN_NOW)]
    [memo] = known_now.unranked
    assert memo.name == UNRANKED and memo.rank is None and not memo.pareto
    assert memo not in known_now.shown  # its privacy (20.0) would otherwise rank first
    assert known_now.listing_of(memo) == "unranked"
    index = (site / "index.html").read_text()
    table = _section(index, f'id="tbl-{known_now.id}"', "</table>")
    assert UNRANKED not in table and table.count('class="num rank"') == 5
    below = _section(index, '<div class="unranked">', "</div>")
    assert f"entries/{memo.id}.html" in below and MEMORIZER_FLAG in below
    doc = json.loads((site / "data" / f"{known_now.id}.json").read_text())
    rows = {r["entry"]: r for r in doc["rows"]}
    assert rows[UNRANKED]["listing"] == "unranked" and rows[UNRANKED]["rank_lo"] is None
    assert (rows["unet"]["rank_lo"], rows["unet"]["rank_hi"]) == (1, 2)
    page = (site / "entries" / f"{memo.id}.html").read_text()
    assert "not ranked" in page and "failed" in page and "privacy rank" not in page


def test_old_protocol_versions_are_archived(results: Path, site: Path) -> None:
    tables = _tables(results)
    index = (site / "index.html").read_text()
    archive = (site / "archive.html").read_text()
    for key in (("known", 1), ("cross-dataset", 1)):
        t = tables[key]
        assert f'id="{t.id}"' not in index and f'id="{t.id}"' in archive
        assert not any(f"entries/{e.id}.html" in index for e in t.entries)
        board = _section(archive, f'id="{t.id}"')
        assert "archived (protocol v1)" in board and "not comparable" in board
        assert 'class="num rank"' not in board and "badge-pareto" not in board
    assert f'id="{tables[("known", KNOWN_NOW)].id}"' in index
    assert "7 results in 2 tables measured under older protocol versions" in index
    v1_entry = next(e for e in tables[("known", 1)].entries if e.name == "unet")
    page = (site / "entries" / f"{v1_entry.id}.html").read_text()
    assert "archived (protocol v1)" in page and 'href="../archive.html#' in page


def test_next_version_records_are_shown_apart_with_their_coverage(
        tmp_path: Path, reported: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records of the next version (made entry by entry) are neither ranked nor archived:
    the archive page shows them first with how much of the current table they cover, the
    index links there, and the current table still ranks."""
    pid = "unseen-attackers"
    now_version = PROTOCOLS.get(pid).version
    # a stand-in next version: whether one is in preparation today is not this test's business
    monkeypatch.setitem(NEXT, pid, PROTOCOLS.get(pid).model_copy(
        update={"version": now_version + 1}))
    next_version = NEXT[pid].version
    monkeypatch.setitem(FIXTURE, (pid, now_version), FIXTURE[("known", KNOWN_NOW)])
    monkeypatch.setitem(FIXTURE, (pid, next_version),
                        {"identity": (93.0, 86.0), "unet": (86.0, 58.0)})
    results = tmp_path / "results"
    for version in (now_version, next_version):
        for name in FIXTURE[("unseen-attackers", version)]:
            rec = make_record("unseen-attackers", version, name)
            if name == UNRANKED:  # a submitted file: only its author can re-make it
                rec.submission.format = "torch.export"
            write_record(rec, results / f"pa-synth-tiny__{pid}__v{version}__{name}.json")
    tables = _tables(results)
    upcoming = tables[("unseen-attackers", next_version)]
    now = tables[("unseen-attackers", now_version)]
    assert (upcoming.listing, now.listing) == ("next", "ranked")
    assert upcoming.spec == NEXT["unseen-attackers"] and "tiny-tsm" in upcoming.spec.attackers
    assert upcoming.covers == (2, 6) and now.covers is None
    assert [e.name for e in upcoming.missing] == [UNRANKED, "black", "box-blur-face",
                                                  "downsample-4x"]
    command = (f"pabench evaluate baseline:black,box-blur-face,downsample-4x --protocol "
               f"unseen-attackers@{next_version} --benchmark pa-synth --preset tiny")
    assert upcoming.remake_command == command
    assert all(e.rank is None and not e.pareto for e in upcoming.entries)
    out = tmp_path / "site"
    build_site(results, reported, out)
    index, archive = (out / "index.html").read_text(), (out / "archive.html").read_text()
    assert f'id="{upcoming.id}"' not in index and f'id="{now.id}"' in index
    assert f"unseen-attackers v{next_version}: 2 of 6" in index and 'archive.html#next"' in index
    board = _section(archive, f'id="{upcoming.id}"')
    assert f"next version v{next_version}, in preparation" in board
    assert "2 of its 6 entries" in board
    assert f"Not re-made yet: {UNRANKED}, black, box-blur-face, downsample-4x." in board
    assert f"<code>{command}</code>" in board
    assert 'class="num rank"' not in board
    page = (out / "entries" / f"{upcoming.entries[0].id}.html").read_text()
    assert 'href="../archive.html#' in page and "In preparation" in page
    assert f"v{next_version} in preparation" in (out / "protocols.html").read_text()


def test_spearman_agreement_over_shared_entries() -> None:
    a = {"w": 1.0, "x": 2.0, "y": 3.0, "z": 4.0}
    b = {"w": 10.0, "x": 30.0, "y": 20.0, "z": 40.0, "v": 0.0}  # x and y swapped, v extra
    c = {"w": 4.0, "x": 3.0, "y": 2.0}  # reversed, but only 3 entries shared with a
    rho, shared = spearman({"a": a, "b": b, "c": c})
    assert rho[0][0] == 1.0 and rho[0][1] == rho[1][0] == 0.8  # 1 - 6 * 2 / (4 * 15)
    assert rho[0][2] is None and rho[1][2] is None
    assert shared == [[4, 4, 3], [4, 5, 3], [3, 3, 3]]


def test_protocols_page_compares_current_rankings(results: Path, site: Path) -> None:
    [agreement] = rank_agreement(_tables(results).values())
    # archived v1 tables stay out; the unranked memorizer is not an entry of known's current order
    assert [(t.protocol, t.version) for t in agreement.tables] == [
        ("known", KNOWN_NOW), ("raw-pretrained-attacker", RAW_NOW)]
    assert agreement.shared == [[5, 2], [2, 4]]  # identity and downsample-4x in both
    assert agreement.rho == [[1.0, None], [None, 1.0]]
    page = _section((site / "protocols.html").read_text(), "Do the protocols rank alike?",
                    "</table>")
    assert page.count("<tr>") == 3 and page.count("– <span") == 2 and "(2)" in page  # + header


def test_diagnostic_protocol_is_shown_apart(results: Path, site: Path) -> None:
    t = _tables(results)[("raw-pretrained-attacker", RAW_NOW)]
    spec = PROTOCOLS.get("raw-pretrained-attacker")
    index = (site / "index.html").read_text()
    ranked_end = index.index('<section class="hero" id="diagnostics">')
    assert index.index(f'id="{t.id}"') > ranked_end  # under Diagnostics, after ranked tables
    assert index.index(f'id="{_tables(results)[("known", KNOWN_NOW)].id}"') < ranked_end
    board = _section(index, f'id="{t.id}"')
    assert "diagnostic, not ranked" in board and spec.paper_setting in board
    table = _section(board, f'id="tbl-{t.id}"', "</table>")
    assert table.count('<tr data-name=') == len(FIXTURE[("raw-pretrained-attacker", RAW_NOW)])
    assert table.count('class="control"') == 2 and table.count(">lossless control<") == 2
    for name in ("invert", "channel-permute"):
        row = _section(table, f'<tr data-name="{name}"', "</tr>")
        assert "lossless control" in row
    assert 'class="num rank"' not in table and "badge-pareto" not in table
    assert "Pareto-optimal only" not in board
    page = (site / "protocols" / "raw-pretrained-attacker.html").read_text()
    assert "diagnostic, not ranked" in page and spec.paper_setting in page
    assert "diagnostic, not ranked" not in (site / "protocols" / "known.html").read_text()


def test_entry_page_shows_curves_and_checks(results: Path, site: Path) -> None:
    unet = next(e for e in _tables(results)[("known", KNOWN_NOW)].entries if e.name == "unet")
    rec = unet.record
    page = (site / "entries" / f"{unet.id}.html").read_text()
    curves = _section(page, "<h2>Training curves</h2>")
    n_curves = len(rec.metrics.target_curves) + sum(len(a.curves) for a in rec.attackers)
    assert curves.count('<figure class="curve">') == 1 + len(rec.attackers)
    assert curves.count('<polyline class="curve-line"') == n_curves
    assert curves.count('class="run seed-0 attempt"') == 1  # the replaced attempt, dashed
    assert curves.count('<circle class="best"') == n_curves
    assert "convergence" in curves and "<script" not in curves
    assert "trained to convergence" not in page
    # the target's best epoch (10) is marked on its curve at epoch 10's score
    first = rec.metrics.target_curves[0]
    assert f"best epoch {first.best_epoch} of {first.epochs}" in curves
    attackers = _section(page, "<h2>Attackers</h2>")
    weak = _section(attackers, f"<td>{WEAK}", "</tr>")
    assert "badge-weak" in weak and attackers.count("badge-weak") == 1
    assert "43.0" in weak  # raw_cmap recorded with the attacker, not the raw run's cMAP
    budget = PROTOCOLS.get("known").schedule_for("attributes").max_epochs  # the spec's rule
    assert f"Each attacker trains for its whole budget ({budget} epochs)" in attackers
    checks = _section(page, "<h2>Checks</h2>")
    assert "private seed" in checks and COMMITMENT in checks
    assert "passed" in checks and "51.0" in checks and rec.flags[0] in checks
    assert "Privacy vs chance" in page and "base rate 30.0" in page
    recipe = _section(page, "<dt>f_A recipe</dt>", "</dd>")
    assert 'steps <code>600</code>' in recipe and 'method <code>"vita-kbeam"</code>' in recipe
    assert '<code>["tiny-vgg2d", "tiny-dws2d"]</code>' in recipe and "seed <code>4</code>" in recipe
    assert "(the first training seed's)" in recipe  # the unet fixture has replicas
    assert f"{rec.metrics.privacy_norm:.2f}" in page and "privacy rank 1–2" in page


def test_training_seeds_are_shown(results: Path, site: Path) -> None:
    """A method scored over several training seeds says so in its row and lists them, with
    where its f_A was trained; a trained method scored once is marked as one training seed's
    draw."""
    entries = {e.name: e for e in _tables(results)[("known", KNOWN_NOW)].entries}
    page = (site / "entries" / f"{entries['unet'].id}.html").read_text()
    assert "3 training seeds" in page and "1 training seed<" not in page
    assert "seed 2 <code class=\"hash\">" + "2" * 16 + "</code> (trained with seed 6)" in page
    trained = _section(page, "<dt>f_A trained on</dt>", "</dd>")  # and where (seed 2's other)
    assert "cpu: Fixture CPU" in trained and "threads: 1" in trained and "other hardware" in trained
    index = (site / "index.html").read_text()
    row = _section(index, 'data-name="unet"', "</tr>")
    assert "3 training seeds" in row
    other = _section(index, 'data-name="downsample-4x"', "</tr>")
    assert "1 training seed<" in other and "training seeds" not in other


def test_a_probe_attacker_is_badged_not_judged_weak(results: Path, tmp_path: Path) -> None:
    """A linear probe (v4) is weak on raw data by design: its row says "probe", never "weak"."""
    unet = next(e for e in _tables(results)[("known", KNOWN_NOW)].entries if e.name == "unet")
    probe = unet.record.attackers[1].model_copy(update=dict(arch="linear-probe", strong=None,
                                                             raw_cmap=72.0))
    rec = unet.record.model_copy(update=dict(attackers=[*unet.record.attackers, probe]))
    write_record(rec, tmp_path / "results" / f"pa-synth-tiny__known__v{KNOWN_NOW}__unet.json")
    build_site(tmp_path / "results", tmp_path / "none", tmp_path / "site")
    page = (tmp_path / "site" / "entries" / f"{unet.id}.html").read_text()
    attackers = _section(page, "<h2>Attackers</h2>")
    row = _section(attackers, "<td>linear-probe", "</tr>")
    assert ">probe</span>" in row and "badge-weak" not in row
    assert attackers.count(">probe</span>") == 1 and attackers.count("badge-weak") == 1


def test_v1_schema_record_still_renders(tmp_path: Path) -> None:
    """A record of schema v1 (protocol v1): archived, its page without v3 parts."""
    src = TEST_RECORDS / "pa-synth-tiny__known__identity.json"
    doc = json.loads(src.read_text())
    assert doc["schema_version"] == 1 and "action_top1" in doc["metrics"]
    results = tmp_path / "results"
    for rel in [src.name, *doc["samples"]]:
        (results / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src.parent / rel, results / rel)
    build_site(results, tmp_path / "none", tmp_path / "site")
    [table] = build_tables(load_records(results))
    [entry] = table.entries
    assert table.listing == "archived"
    page = (tmp_path / "site" / "entries" / f"{entry.id}.html").read_text()
    assert f'{doc["metrics"]["action_top1"]:.1f}' in page
    assert "Training curves" not in page and "Privacy vs chance" not in page
    assert "public seed" in page and "weak" not in page
    assert f'id="{table.id}"' in (tmp_path / "site" / "archive.html").read_text()
    assert f'id="{table.id}"' not in (tmp_path / "site" / "index.html").read_text()


def test_scatter_marks_the_base_rate(results: Path, site: Path) -> None:
    from pabench.leaderboard.scatter import scatter

    tables = _tables(results)
    plot = scatter(tables[("known", KNOWN_NOW)])
    assert plot.base_x is not None and plot.left < plot.base_x < plot.ref_x
    assert UNRANKED not in {p.name for p in plot.points}  # only ranked entries are plotted
    assert scatter(tables[("known", 1)]).base_x is None  # v1 records carry no base rate
    index = (site / "index.html").read_text()
    board = _section(index, f'id="{tables[("known", KNOWN_NOW)].id}"')
    assert f'<line class="base" x1="{plot.base_x}"' in board


def test_controls_are_shown_unranked(site: Path, results: Path) -> None:
    """An all-black video has the best privacy of any entry and must not rank first: the
    controls and the raw reference sit in the table, unranked, badged for what they are."""
    known_now = _tables(results)[("known", KNOWN_NOW)]
    table = _section((site / "index.html").read_text(), f'id="tbl-{known_now.id}"', "</table>")
    black = _section(table, '<tr data-name="black"', "</tr>")
    assert "chance control" in black and "badge-pareto" not in black
    assert '<td class="num rank" data-value=""></td>' in black
    unet = _section(table, '<tr data-name="unet"', "</tr>")
    assert '<td class="num rank" data-value="1">1–2</td>' in unet
    rows = json.loads((site / "data" / f"{known_now.id}.json").read_text())["rows"]
    control = {r["entry"]: (r["control"], r["rank_lo"], r["pareto_optimal"]) for r in rows}
    assert control["black"] == ("chance", None, False)
    assert control["identity"] == (None, None, False)
    assert control["unet"] == (None, 1, True)


def test_downloads_match_records(site: Path, results: Path) -> None:
    for (protocol, version), t in _tables(results).items():
        csv = pd.read_csv(site / "data" / f"{t.id}.csv")
        doc = json.loads((site / "data" / f"{t.id}.json").read_text())
        assert doc["protocol"] == protocol and doc["protocol_version"] == version
        assert doc["raw_reference"]["action"] == FIXTURE[(protocol, version)]["identity"][0]
        assert doc["listing"] == t.listing
        assert len(csv) == len(doc["rows"]) == len(FIXTURE[(protocol, version)])
        for row, jrow in zip(csv.to_dict("records"), doc["rows"], strict=True):
            rec = next(e.record for e in t.entries if e.name == row["entry"])
            assert jrow["entry"] == row["entry"]
            assert (row["action"], row["privacy_cmap"]) == FIXTURE[(protocol, version)][
                row["entry"]]
            assert row["privacy_f1"] == pytest.approx(rec.metrics.privacy_f1)
            assert row["action_ci_lo"] == rec.metrics.action_ci[0]
            assert jrow["privacy_norm"] == rec.metrics.privacy_norm
            assert jrow["test_seed"] == rec.benchmark.test_seed
            assert jrow["action_drop"] == rec.metrics.action_drop
            assert row["params"] == rec.submission.params
            assert row["pareto_optimal"] == jrow["pareto_optimal"]
            assert row["status"] == "pabench-baseline"  # every fixture is a baseline


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
    assert proc.returncode == 1
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
    assert summary.tables == 0 and "No verified results under the current protocols yet" in (
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
    rec = make_record("known", KNOWN_NOW, "identity")
    rec = rec.model_copy(update={"metrics": rec.metrics.model_copy(
        update={"action_metric": "cmap"})})
    write_record(rec, tmp_path / "results" / "r.json")
    tables = build_tables(load_records(tmp_path / "results"))
    assert tables[0].action_metric == "cMAP"
    build_site(tmp_path / "results", tmp_path / "none", tmp_path / "site")
    html = (tmp_path / "site" / "index.html").read_text()
    assert "Action cMAP ↑" in html and "action cMAP (%)" in html and "Action top" not in html


def test_late_gain_counts_only_the_last_fifth() -> None:
    def curve(score: list[float]) -> Curve:
        n = len(score)
        return Curve(seed=0, lr=1e-3, epochs=n, best_epoch=n, train_loss=[1.0] * n,
                     val_loss=[1.0] * n, val_score=score)

    assert late_gain(curve([50, 60, 60, 60, 63])) == pytest.approx(3.0)  # still rising
    assert late_gain(curve([50, 60, 70, 60, 61])) == 0.0  # best long before the end
    assert late_gain(curve([10.0] * 10 + [12.0, 15.0])) == pytest.approx(5.0)  # last 2 of 12
    assert late_gain(curve([70.0])) == 0.0


def test_show_quotes_the_records(results: Path) -> None:
    """`leaderboard show` prints each entry's numbers as its record holds them, the same
    entry's number in another version beside it, and counts the chosen attacker runs."""
    out = CliRunner().invoke(app, ["leaderboard", "show", "known", "--results", str(results),
                                   "--against", "known@1", "--markdown"])
    assert out.exit_code == 0, out.output
    table = _tables(results)[("known", KNOWN_NOW)]
    old = {e.name: e.m for e in _tables(results)[("known", 1)].entries}
    lines = out.stdout.splitlines()

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip("|").split("|")]

    head = cells(lines[2])
    rows = {r["entry"]: r for r in (dict(zip(head, cells(ln), strict=True))
                                    for ln in lines[4:4 + len(table.entries)])}
    assert set(rows) == {e.name for e in table.entries}
    # the site's tie groups; the raw reference, a control and an unranked record have none
    assert {n: r["rank"] for n, r in rows.items()} == {
        "unet": "1–2", "box-blur-face": "1–2", "downsample-4x": "3", "identity": "",
        "black": "", UNRANKED: ""}
    for e in table.entries:
        r, m = rows[e.name], e.m
        assert r["worst-case cMAP"] == (f"{m.privacy_cmap:.1f} [{m.privacy_cmap_ci[0]:.1f}, "
                                        f"{m.privacy_cmap_ci[1]:.1f}]")
        assert r["known@1"].split(" ")[0] == (f"{old[e.name].privacy_cmap:.1f}"
                                             if e.name in old else "")
        assert r[ATTACKERS[1]] == f"{e.record.attackers[1].cmap:.1f}"
        assert r["per-seed worst"] == ", ".join(
            f"{max(a.cmap_per_seed[i] for a in e.record.attackers):.1f}" for i in range(3))
    runs = sum(c.chosen for e in table.entries for a in e.record.attackers for c in a.curves)
    assert lines[-1].startswith(f"{runs} chosen attacker runs; 0 gained")
    narrow = CliRunner().invoke(app, ["leaderboard", "show", "known", "--results",
                                      str(results)], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0 and all(e.name in narrow.stdout for e in table.entries)
    assert "…" not in narrow.stdout  # folded, never cut
    missing = CliRunner().invoke(app, ["leaderboard", "show", "known@2", "--results",
                                       str(results)])  # a version without records here
    assert missing.exit_code != 0 and "known@1" in str(missing.exception or missing.output)
    unknown = CliRunner().invoke(app, ["leaderboard", "show", "known@9", "--results",
                                       str(results)])
    assert unknown.exit_code != 0 and "no version '9'" in str(unknown.exception)


def test_a_record_of_an_older_recipe_is_marked(results: Path, tmp_path: Path) -> None:
    """A learned baseline's record made before its recipe changed says so (table badge, entry
    page, download cell); one of the current recipe says that; one that predates records naming
    their recipe says it is not recorded. Seed aside: replicas differ in it."""
    unet = next(e for e in _tables(results)[("known", KNOWN_NOW)].entries if e.name == "unet")
    recipes = {"vita-kbeam": {**default_recipe("vita-kbeam").model_dump(mode="json"),
                              "steps": 200, "seed": 1},
               "mppar": {**default_recipe("mppar").model_dump(mode="json"), "seed": 1},
               "spact": None}
    for name, recipe in recipes.items():
        s = unet.record.submission
        sub = s.model_copy(update=dict(name=name, format="baseline", meta=s.meta.model_copy(
            update=dict(name=name, training_recipe=recipe))))
        write_record(unet.record.model_copy(update=dict(submission=sub)),
                     tmp_path / "results" / f"pa-synth-tiny__known__v{KNOWN_NOW}__{name}.json")
    build_site(tmp_path / "results", tmp_path / "none", tmp_path / "site")
    entries = {e.name: e for e in _tables(tmp_path / "results")[("known", KNOWN_NOW)].entries}
    assert entries["vita-kbeam"].recipe_changes == ["steps 200 -> 600"]
    assert entries["mppar"].recipe_changes == [] and entries["spact"].recipe_changes is None
    index = (tmp_path / "site" / "index.html").read_text()
    assert "older recipe" in _section(index, 'data-name="vita-kbeam"', "</tr>")
    assert "older recipe" not in _section(index, 'data-name="mppar"', "</tr>")
    page = (tmp_path / "site" / "entries" / f"{entries['vita-kbeam'].id}.html").read_text()
    assert "recipe has changed since: steps 200 -&gt; 600" in page
    page = (tmp_path / "site" / "entries" / f"{entries['mppar'].id}.html").read_text()
    assert "mppar's current recipe" in page and "older recipe" not in page
    page = (tmp_path / "site" / "entries" / f"{entries['spact'].id}.html").read_text()
    assert "not recorded" in _section(page, "<dt>f_A recipe</dt>", "</dd>")
    table = entries["mppar"].record.table_id
    cells = pd.read_csv(tmp_path / "site" / "data" / f"{table}.csv").set_index("entry")
    assert cells.loc["vita-kbeam", "f_a_recipe"] == "older: steps 200 -> 600"
    assert cells.loc["mppar", "f_a_recipe"] == "current"
    assert cells["f_a_recipe"].isna()["spact"]
    shown = CliRunner().invoke(app, ["leaderboard", "show", f"known@{KNOWN_NOW}", "--markdown",
                                     "--results", str(tmp_path / "results")])
    assert shown.exit_code == 0 and "| vita-kbeam (older recipe) |" in shown.output
    assert "| mppar |" in shown.output
