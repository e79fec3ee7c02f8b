"""Calibration of pa-synth against the papers: rank correlations, method matching, the
downsampling checks, the command and the site panel."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_leaderboard import KNOWN_NOW, ROOT, _attackers, _metrics, make_record
from typer.testing import CliRunner

from pabench.cli import app
from pabench.errors import PabenchError
from pabench.leaderboard import build_site, build_tables
from pabench.leaderboard.calibration import SETTINGS, SOURCE, calibrate, calibration
from pabench.leaderboard.reported import CITATIONS, ReportedGroup
from pabench.leaderboard.tables import Table
from pabench.protocols import PROTOCOLS
from pabench.records import Record, write_record

REPORTED = ROOT / "leaderboard" / "reported"
CROSS_NOW = PROTOCOLS.get("cross-dataset").version
# reported method -> (top-1, cMAP), shaped like SPAct Table 1's rows
PAPER = {"Raw data": (60.0, 70.0), "Downsample-2x": (50.0, 60.0),
         "Downsample-4x": (40.0, 50.0), "Obf-Blackening": (30.0, 40.0)}
SAME = {"identity": (90.0, 95.0), "downsample-2x": (80.0, 85.0), "downsample-4x": (70.0, 75.0),
        "box-black-body": (60.0, 65.0), "downsample-8x": (65.0, 70.0), "spact": (10.0, 10.0)}


def _record(protocol: str, version: int, name: str, scores: tuple[float, float]) -> Record:
    """A record whose numbers agree with each other (as the engine writes them) at `scores`."""
    rec = make_record("known", KNOWN_NOW, "identity")
    raw = (rec.raw.action, rec.raw.privacy_cmap) if rec.raw is not None else None
    return rec.model_copy(update=dict(
        protocol=rec.protocol.model_copy(update=dict(id=protocol, version=version)),
        submission=rec.submission.model_copy(update=dict(name=name)),
        metrics=_metrics(*scores, raw, current=True), attackers=_attackers(scores[1], True),
    ))


def _tables(entries: dict[str, tuple[float, float]], protocol: str = "known",
            version: int = KNOWN_NOW) -> list[Table]:
    return build_tables((Path(f"{name}.json"), _record(protocol, version, name, s))
                        for name, s in entries.items())


def _group(rows: dict[str, tuple[float, float]], setting: str = SETTINGS["known"]
           ) -> ReportedGroup:
    return ReportedGroup(
        source=SOURCE, citation=CITATIONS[SOURCE], table="Table 1", protocol="known",
        setting=setting, action_dataset="A", privacy_dataset="P", note="",
        rows=[{"method": m, "action_metric": "top1", "action": a, "privacy_cmap": p}
              for m, (a, p) in rows.items()])


def _paper(known: dict[str, tuple[float, float]],
           cross: dict[str, tuple[float, float]] | None = None) -> list[ReportedGroup]:
    return [_group(known), _group(cross or known, SETTINGS["cross-dataset"])]


def test_identical_orderings_agree_fully() -> None:
    (c,) = calibrate(_tables(SAME), _paper(PAPER))
    assert (c.protocol, c.version, c.n) == ("known", KNOWN_NOW, 4)
    assert c.action_rho == pytest.approx(1.0) and c.privacy_rho == pytest.approx(1.0)
    assert c.paper_action_rho == pytest.approx(1.0)
    assert ("Raw data", "identity") in c.matched and "spact" not in str(c.matched)
    assert ("Obf-StrongBlur", "box-blur-body-strong") in c.missing  # on neither side here
    assert (c.cost, c.paper_cost) == (20.0, 20.0)
    assert c.downsampling == [80.0, 70.0, 65.0] and c.order_holds is True
    assert [k.verdict for k in c.checks] == ["pass", "pass", "pass", "pass"]


def test_reversed_orderings_disagree_fully() -> None:
    flipped = {m: (100 - a, 100 - p) for m, (a, p) in PAPER.items()}
    (c,) = calibrate(_tables(SAME), _paper(flipped, PAPER))
    assert c.action_rho == pytest.approx(-1.0) and c.privacy_rho == pytest.approx(-1.0)
    assert c.paper_action_rho == pytest.approx(-1.0)  # the two paper settings disagree too
    assert c.paper_cost == -20.0
    assert [k.verdict for k in c.checks][:3] == ["miss", "miss", "pass"]


def test_ties_share_their_average_rank() -> None:
    tied = {**SAME, "downsample-2x": (70.0, 75.0)}  # ties downsample-4x on both scores
    (c,) = calibrate(_tables(tied), _paper(PAPER))
    # ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): Pearson of the ranks is sqrt(0.9)
    assert c.action_rho == pytest.approx(math.sqrt(0.9))
    assert c.privacy_rho == pytest.approx(math.sqrt(0.9))
    assert c.order_holds is False and c.checks[3].verdict == "miss"


def test_too_few_methods_or_a_missing_downsampling_is_not_measured() -> None:
    few = {k: v for k, v in SAME.items() if k not in ("box-black-body", "downsample-8x")}
    (c,) = calibrate(_tables(few), _paper(PAPER))
    assert c.n == 3 and c.action_rho is None and c.privacy_rho is None
    assert c.order_holds is None
    assert [k.verdict for k in c.checks] == ["n/a", "n/a", "pass", "n/a"]


def test_current_versions_unless_one_is_picked() -> None:
    tables = _tables(SAME) + _tables(SAME, "known", 1) + _tables(SAME, "novel", KNOWN_NOW)
    assert [c.version for c in calibrate(tables, _paper(PAPER))] == [KNOWN_NOW]
    assert [c.version for c in calibrate(tables, _paper(PAPER), version=1)] == [1]
    assert calibrate(tables, []) == []  # no paper rows, nothing to calibrate against


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pa-synth records in the order of SPAct Table 1: `known` follows the paper on both
    scores, `cross-dataset` reverses its privacy order."""
    from pabench.leaderboard.calibration import METHODS
    from pabench.leaderboard.reported import load_reported

    root = tmp_path_factory.mktemp("calib") / "results"
    paper = {g.setting: g for g in load_reported(REPORTED) if g.source == SOURCE
             and g.table == "Table 1"}
    for protocol, version in (("known", KNOWN_NOW), ("cross-dataset", CROSS_NOW)):
        rows = {r["method"]: r for r in paper[SETTINGS[protocol]].rows}
        for method, name in METHODS.items():
            top1, cmap = float(rows[method]["action"]), float(rows[method]["privacy_cmap"])
            cmap = cmap if protocol == "known" else 100.0 - cmap
            rec = _record(protocol, version, name, (min(100.0, top1 + 30), cmap))
            write_record(rec, root / f"{rec.entry_id}.json")
    return root


def test_measured_on_the_vendored_paper_rows(results: Path) -> None:
    known, cross = calibration(results, REPORTED)
    assert (known.protocol, cross.protocol) == ("known", "cross-dataset")
    assert known.n == cross.n == 6
    assert known.action_rho == pytest.approx(1.0) and known.privacy_rho == pytest.approx(1.0)
    assert cross.privacy_rho == pytest.approx(-1.0) and cross.action_rho == pytest.approx(1.0)
    assert known.paper_cost == pytest.approx(43.6 - 25.8)  # SPAct: raw minus downsample-4x


def test_command_prints_one_row_per_protocol(results: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["protocols", "calibrate", "--results", str(results)],
                        env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    rows = [line for line in res.stdout.splitlines() if f"@{KNOWN_NOW} (tiny)" in line
            or f"@{CROSS_NOW} (tiny)" in line]
    assert len(rows) == 2 and "known@" in rows[0] and "cross-dataset@" in rows[1]
    assert "1.00 pass" in rows[0] and "-1.00 miss" in rows[1]
    assert "Obf-Blackening -> box-black-body" in res.stdout

    res = runner.invoke(app, ["protocols", "calibrate", "--results", str(results), "--json"])
    doc = json.loads(res.stdout)
    assert [d["protocol"] for d in doc] == ["known", "cross-dataset"]
    assert doc[0]["checks"][1] == {"name": "privacy rho", "value": pytest.approx(1.0),
                                   "target": ">= 0.75", "passed": True, "shown": "1.00",
                                   "verdict": "pass"}


def test_command_names_what_is_missing(results: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["protocols", "calibrate", "--results", str(results),
                              "--version", "99"])
    assert isinstance(res.exception, PabenchError)
    assert str(res.exception) == (f"{results}: no pa-synth records of known, cross-dataset at "
                                  "version 99")
    res = runner.invoke(app, ["protocols", "calibrate", "--results", str(results),
                              "--reported", str(tmp_path)])
    assert isinstance(res.exception, PabenchError)
    assert str(res.exception).startswith(f"{tmp_path}/paper_results.csv: no rows of SPAct")


def test_site_shows_the_same_panel(results: Path, tmp_path: Path) -> None:
    build_site(results, REPORTED, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'id="calibration"' in index
    panel = index[index.index('id="calibration"'):]
    panel = panel[:panel.index("</section>")]
    assert panel.count("<tr>") == 3 and "pabench protocols calibrate" in panel  # head + 2
    assert "Obf-StrongBlur → box-blur-body-strong" in panel
    assert "-1.00" in panel and "badge-weak" in panel and "badge-verified" in panel
    build_site(results, tmp_path / "empty", tmp_path / "bare")  # no paper rows, no panel
    assert 'id="calibration"' not in (tmp_path / "bare" / "index.html").read_text()
