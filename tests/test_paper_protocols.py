"""Paper reproductions: each names the setting it reproduces and every approximation, uses
datasets and models pabench has, is listed and documented apart, and is never ranked or run by
`--protocol all`."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from pabench.cli import app
from pabench.data.registry import DATASETS
from pabench.evaluation.config import expand
from pabench.leaderboard.reported import CITATIONS, read_reported_csv
from pabench.models import MODELS
from pabench.protocols import CATALOG, PROTOCOLS, ProtocolSpec, protocols_for
from pabench.protocols.describe import render_docs
from pabench.protocols.papers import PAPER_PROTOCOLS, VITA
from pabench.protocols.spec import ModelWeights, Reproduces

REPORTED = Path(__file__).resolve().parents[1] / "leaderboard" / "reported" / "paper_results.csv"
runner = CliRunner()
SPECS = [versions.DEFAULT.spec for versions in PAPER_PROTOCOLS]
REQUIRED = {("SPAct (Dave et al., CVPR 2022)", "Table 1", "UCF101", "VISPR1"),
            ("SPAct (Dave et al., CVPR 2022)", "Table 1", "HMDB51 -> PA-HMDB51",
             "VISPR1 -> PA-HMDB51"),
            ("SPAct (Dave et al., CVPR 2022)", "Table 2", "UCF101 -> HMDB51", "VISPR1 -> VISPR2"),
            ("Penalty-driven anonymization (Aslam & Nasrollahi, 2025)", "Table 1", "UCF101",
             "VISPR1"),
            (VITA, "Fig. 7", "HMDB51 -> PA-HMDB51", "VISPR -> PA-HMDB51"),
            ("MPPAR (NeurIPS 2023) supplementary, Table 1", "Supp. Table 1", "UCF101", "VISPR")}


def test_the_required_settings_are_reproduced() -> None:
    found = {(s.reproduces.paper, s.reproduces.table, s.reproduces.action, s.reproduces.privacy)
             for s in SPECS if s.reproduces}
    assert REQUIRED <= found


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_a_reproduction_is_complete_and_runnable(spec: ProtocolSpec) -> None:
    assert spec.role == "reproduction" and spec.benchmark == "real" and spec.reproduces
    assert spec.approximations, "every reproduction differs from its paper somewhere"
    for text in spec.approximations:  # one sentence each
        assert text.endswith(".") and not re.search(r"\.\s+[A-Z]", text), text
    for ref in (spec.action_train, spec.action_test, spec.privacy_train, spec.privacy_test):
        assert ref.dataset in DATASETS, ref
    assert spec.target in MODELS and all(a in MODELS for a in spec.attackers)
    assert spec.weights is not None  # every model says where it starts, null included
    assert set(spec.weights.attackers) == set(spec.attackers)
    assert spec.clip.frames and spec.clip.size


def test_reported_rows_exist_for_each_vendored_paper() -> None:
    """The paper and dataset columns match the vendored reported rows the comparison reads."""
    rows = read_reported_csv(REPORTED)
    for spec in SPECS:
        r = spec.reproduces
        if r.paper not in CITATIONS:
            continue  # VITA reports plots only
        ours = [x for x in rows if (x["source"], x["table"]) == (r.paper, r.table)]
        assert any(x["action_dataset"] == r.action for x in ours), r
        assert any(x["privacy_dataset"] == r.privacy for x in ours), r


def test_released_specs_dump_without_the_new_fields() -> None:
    """Old versions' JSON has no weights/reproduces/approximations keys (fixture-identical)."""
    old = PROTOCOLS.get("known").model_dump(mode="json")
    assert not {"weights", "reproduces", "approximations"} & set(old)
    new = SPECS[0].model_dump(mode="json")
    assert new["weights"] == {"target": None, "attackers": {"resnet50": None}}
    assert ProtocolSpec.model_validate(new) == SPECS[0]


def test_a_reproduction_must_say_what_it_reproduces() -> None:
    data = SPECS[0].model_dump()
    with pytest.raises(ValidationError, match="names the paper setting"):
        ProtocolSpec.model_validate({**data, "reproduces": None})
    with pytest.raises(ValidationError, match="names the paper setting"):
        ProtocolSpec.model_validate({**PROTOCOLS.get("known").model_dump(),
                                     "reproduces": Reproduces(paper="p", table="t", setting="s")})
    with pytest.raises(ValidationError, match="weights name attackers"):
        ProtocolSpec.model_validate({**data, "weights": ModelWeights(attackers={"resnet18": None})})


def test_weights_for_each_model() -> None:
    penalty = PROTOCOLS.get("paper-penalty-t1-ucf101-vispr1")
    assert penalty.weights_for("r3d_18", "action") == "R3D_18_Weights.KINETICS400_V1"
    assert penalty.weights_for("resnet50", "attributes") is None
    assert PROTOCOLS.get("known").weights_for("tiny3d", "action") is None


def test_list_shows_reproductions_apart() -> None:
    out = runner.invoke(app, ["protocols", "list"], env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    own, _, papers = out.stdout.partition("paper reproductions (never ranked)")
    assert papers and all(s.id in papers and s.id not in own for s in SPECS)
    rows = json.loads(runner.invoke(app, ["protocols", "list", "--json"]).stdout)
    roles = {r["id"]: (r["role"], r["reproduces"]) for r in rows}
    assert roles["known"] == ("ranked", None)
    assert roles[SPECS[0].id] == ("reproduction", SPECS[0].reproduces.model_dump())


def test_docs_list_each_reproduction_with_its_approximations() -> None:
    docs = render_docs()
    own, _, papers = docs.partition("# Paper reproductions")
    for spec in SPECS:
        section = papers.split(f"## {spec.id}\n", 1)[1].split("\n## ", 1)[0]
        assert all(f"- {a}\n" in section for a in spec.approximations)
        assert f"## {spec.id}\n" not in own
    assert all(pid in own for pid in CATALOG if not pid.startswith("paper-"))


def test_all_protocols_leave_out_the_reproductions() -> None:
    every = {p.id for p in protocols_for("real")}
    assert {s.id for s in SPECS} <= every
    ran = {c.spec.id for c in expand("baseline:identity", "all", benchmark="real")}
    assert ran == every - {s.id for s in SPECS}


def _gpu_reproduce():
    spec = importlib.util.spec_from_file_location(
        "gpu_reproduce", REPORTED.parents[2] / "benchmarks" / "gpu_reproduce.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_comparison_reads_the_papers_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    script = _gpu_reproduce()
    rows = read_reported_csv(REPORTED)
    spact = PROTOCOLS.get("paper-spact-t1-ucf101-vispr1").reproduces
    assert script.reported(rows, spact, "Raw data") == pytest.approx(
        {"action": 62.33, "privacy_cmap": 64.41, "privacy_f1": 55.5})
    novel = PROTOCOLS.get("paper-spact-t2-novel").reproduces  # action and privacy rows apart
    assert script.reported(rows, novel, "Downsample-4x") == pytest.approx(
        {"action": 16.8, "privacy_cmap": 41.5, "privacy_f1": 33.1})
    mppar = PROTOCOLS.get("paper-mppar-a-ucf101-vispr").reproduces  # not the HMDB51 row
    assert script.reported(rows, mppar, "Basic adversarial model") == {
        "action": 65.6, "privacy_cmap": 31.7}
    with pytest.raises(SystemExit) as e:
        script.main(["--help"])
    assert e.value.code == 0 and "--weights-dir" in capsys.readouterr().out
    assert script.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(s.id in listed for s in SPECS)
    assert script.main(["known"]) == 2
    assert "not a paper reproduction" in capsys.readouterr().err
