"""The `pabench` command line: listings, one-line errors, exit codes."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from pabench.cli import app

runner = CliRunner()


def _pabench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pabench.cli", *args], capture_output=True,
                          text=True, timeout=120)


def test_datasets_list_and_info():
    out = runner.invoke(app, ["datasets", "list"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    for name in ("synth-pa", "synth-privacy-novel", "pa-hmdb51", "vispr2", "p-hvu"):
        assert name in out.output
    info = runner.invoke(app, ["datasets", "info", "pa-synth"], env={"COLUMNS": "200"})
    assert "preset tiny: 8 frames, 32x32" in info.output


def test_protocols_list_and_show():
    out = runner.invoke(app, ["protocols", "list"], env={"COLUMNS": "250"})
    for pid in ("known", "cross-dataset", "novel", "raw-pretrained-attacker", "unseen-attackers"):
        assert pid in out.output
    show = runner.invoke(app, ["protocols", "show", "novel"], env={"COLUMNS": "200"})
    assert '"novel": true' in show.output


def test_unknown_dataset_and_unwritable_out_are_one_line(tmp_path):
    out = _pabench("datasets", "build", "synth-pq", "--preset", "tiny", "--out", str(tmp_path))
    assert out.returncode == 2 and "Did you mean 'synth-pa'" in out.stderr
    assert out.stderr.strip().count("\n") == 0
    blocker = tmp_path / "f"
    blocker.write_text("")
    out = _pabench("datasets", "build", "pa-synth", "--preset", "tiny", "--out", str(blocker))
    assert out.returncode == 2 and "not writable" in out.stderr
    assert out.stderr.strip().count("\n") == 0


def test_evaluate_picks_the_cpu_preset_and_checks_output_first(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    out = _pabench("evaluate", "baseline:identity", "--output-dir", str(blocker / "results"))
    assert out.returncode == 2
    first, error = out.stderr.strip().split("\n")
    assert first.startswith("preset: tiny (auto for device cpu")
    assert "not writable" in error
