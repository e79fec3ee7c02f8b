"""`pabench datasets push` and `build` through the CLI; only HfApi's network calls are mocked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import HfApi
from huggingface_hub.hf_api import CommitInfo
from PIL import Image
from typer.testing import CliRunner

from pabench.cli.datasets import app
from pabench.data.push import files_to_push, push_dataset
from pabench.errors import PabenchError


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """vispr2 built through the CLI from a tiny per-image JSON source."""
    src = tmp_path / "src"
    for k, split in enumerate(("train", "val", "test")):
        rel = f"annotations/{split}2017/2017_{k}.json"
        (src / rel).parent.mkdir(parents=True)
        (src / f"{split}2017.txt").write_text(rel + "\n")
        image = f"images/{split}2017/2017_{k}.jpg"
        (src / image).parent.mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(src / image)
        (src / rel).write_text(json.dumps({"image_path": image, "labels": ["a16_race"]}))
    result = CliRunner().invoke(app, ["build", "vispr2", "--source", str(src),
                                      "--out", str(tmp_path / "data")])
    assert result.exit_code == 0, result.output
    out = tmp_path / "data" / "vispr2"
    assert json.loads((out / "build_report.json").read_text())["videos"] == {
        "train": 1, "val": 1, "test": 1}
    (out / ".cache").mkdir()
    (out / ".cache" / "decoded.npy").write_bytes(b"x")
    return out


def test_push_uploads_exactly_the_dataset(built: Path, monkeypatch) -> None:
    calls: dict = {}

    def create_repo(self, repo_id, **kw):
        calls["repo"] = (repo_id, kw)

    def create_branch(self, repo_id, **kw):
        calls["branch"] = (repo_id, kw)

    def create_commit(self, repo_id, operations, **kw):
        calls["commit"] = (repo_id, sorted(op.path_in_repo for op in operations), kw)
        return CommitInfo(commit_url=f"https://huggingface.co/datasets/{repo_id}/commit/abc",
                          commit_message="", commit_description="", oid="abc")

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "create_branch", create_branch)
    monkeypatch.setattr(HfApi, "create_commit", create_commit)
    result = CliRunner().invoke(app, ["push", "vispr2", "--repo-id", "org/vispr2", "--data-dir",
                                      str(built.parent), "--private", "--revision", "v1"])
    assert result.exit_code == 0, result.output
    assert calls["repo"] == ("org/vispr2", {"repo_type": "dataset", "private": True,
                                            "exist_ok": True})
    assert calls["branch"] == ("org/vispr2", {"repo_type": "dataset", "branch": "v1",
                                              "exist_ok": True})
    expected = ["README.md", "data/test.parquet", "data/train.parquet", "data/val.parquet",
                "pabench.json", "videos/test/2017_2.jpg", "videos/train/2017_0.jpg",
                "videos/val/2017_1.jpg"]
    assert calls["commit"][1] == expected  # no build_report.json, no .cache
    assert calls["commit"][2]["repo_type"] == "dataset" and calls["commit"][2]["revision"] == "v1"
    assert "commit/abc" in result.output


def test_push_refuses_unbuilt_folder_and_reports_network_errors(built: Path, tmp_path: Path,
                                                               monkeypatch) -> None:
    with pytest.raises(PabenchError, match="not a pabench dataset folder"):
        files_to_push(tmp_path / "nothing")

    def offline(self, repo_id, **kw):
        raise OSError("Cannot reach https://huggingface.co: offline mode is enabled")

    monkeypatch.setattr(HfApi, "create_repo", offline)
    with pytest.raises(PabenchError, match="push to org/x failed: Cannot reach"):
        push_dataset(built, "org/x")


def test_build_option_errors_are_one_line(built: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["build", "vispr2", "--source", str(tmp_path / "src"), "--out",
                                 str(tmp_path / "o"), "--option", "colour=1"])
    assert isinstance(result.exception, PabenchError)
    assert str(result.exception).startswith(
        "dataset 'vispr2' has no option 'colour'; valid: label_format")
    result = runner.invoke(app, ["build", "vispr1", "--source", str(tmp_path / "src"), "--out",
                                 str(tmp_path / "o"), "--option", "label_format=tedspad"])
    assert isinstance(result.exception, PabenchError)
    assert "does not match the tedspad layout" in str(result.exception)


def test_entry_point_script(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[1] / "datasets_scripts" / "ucf101.py"
    run = subprocess.run([sys.executable, str(script), "--source", str(tmp_path), "--out",
                          str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 1  # a PabenchError: one line naming what the source lacks
    assert "ucf101:" in run.stderr and "lacks" in run.stderr
