"""`pabench validate FILE`: the contract checks of a submission in seconds, with no dataset."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from hostile import SmallConv
from quick import one_line_error, pabench_main

from pabench.submission import export_submission


class Nan(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * float("nan")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("validate")
    torch.manual_seed(0)
    static = out / "static.pt2"
    torch.export.save(torch.export.export(SmallConv(), (torch.rand(2, 3, 4, 16, 16),)), static)
    return {"conv": export_submission(SmallConv(), out / "my-conv.pt2", frames=4, size=16),
            "nan": export_submission(Nan(), out / "nan.pt2", frames=4, size=16),
            "static": static}


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_valid_file_gets_a_report_in_seconds_and_no_dataset(files, _home: Path) -> None:
    start = time.perf_counter()
    out = pabench_main("validate", str(files["conv"]), "--preset", "tiny")
    seconds = time.perf_counter() - start
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("my-conv: passed, protocol known v")
    assert "clips [2, 3, 8, 32, 32]" in text  # pa-synth tiny's native clip shape
    assert "file: my-conv.pt2 (torch.export)" in text
    assert "input spec: [1..1024, 3, 1..4096, 8..8192, 8..8192]" in text
    assert "runs at frames 4, 8, 16; height/width 16, 24, 32, 40, 64, 112" in text
    assert "parameters: 246" in text and "FLOPs per clip: " in text
    assert "checks passed: input_spec, shape, dtype, finite, range, deterministic, " \
           "batch_independent, time_budget, memory_budget" in " ".join(text.split())
    assert seconds < 60 and not (_home / "datasets").exists()


@pytest.mark.parametrize("args, shape", [
    (["--preset", "standard"], [2, 3, 16, 64, 64]),
    (["--protocol", "ucf101-vispr1"], [2, 3, 16, 112, 112]),  # the protocol's own clip spec
])
def test_json_report_uses_the_protocols_clip_shape(files, args: list[str], shape) -> None:
    out = pabench_main("validate", str(files["conv"]), *args, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["clip_shape"] == shape and report["params"] == 246
    assert report["file"] == "my-conv.pt2" and len(report["sha256"]) == 64
    assert report["seconds_per_clip"] > 0 and report["checks"][-1] == "memory_budget"
    assert all(report["runs_at"]["height_width"].values())


@pytest.mark.parametrize("name, needles", [
    ("nan", ("validate: output has NaN values", "check 'finite'")),
    ("static", ("check 'input_spec'", "[2, 3, 4, 16, 16]", "[2, 3, 8, 32, 32]")),
])
def test_a_refused_file_is_one_error_line_and_exit_1(files, name: str, needles) -> None:
    one_line_error(pabench_main("validate", str(files[name]), "--preset", "tiny"), 1, *needles)


@pytest.mark.parametrize("args, needle", [
    (["missing.pt2"], "missing.pt2: file not found"),
    (["CONV", "--protocol", "nvel"], "Did you mean 'novel'"),
    (["CONV", "--preset", "huge"], "unknown preset 'huge'"),
    (["CONV", "--meta", "missing.json"], "missing.json: file not found"),
    ([], "Missing argument 'file' (see `pabench validate --help`)"),
])
def test_a_bad_command_line_exits_2_in_one_line(files, args: list[str], needle: str) -> None:
    args = [str(files["conv"]) if a == "CONV" else a for a in args]
    one_line_error(pabench_main("validate", *args), 2, needle)


def test_sidecar_names_no_dataset_pabench_knows(files, tmp_path: Path) -> None:
    """Declared training datasets are compared by name, so a name no registry entry matches
    (a typo, the benchmark's name) is pointed out."""
    sidecar = tmp_path / "meta.json"
    sidecar.write_text(json.dumps({"name": "declared", "training_data": {
        "datasets": ["pa-synth", "synth_pa", "synth-action", "p-hvu:scenes"]}}))
    out = pabench_main("validate", str(files["conv"]), "--meta", str(sidecar), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["name"] == "declared"
    notes = report["notes"]
    assert len(notes) == 2 and "the benchmark 'pa-synth'" in notes[0] and "synth-pa" in notes[0]
    assert "'synth_pa', which is no pabench dataset" in notes[1]
