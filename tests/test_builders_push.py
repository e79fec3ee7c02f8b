"""`pabench datasets push` and `build` through the CLI against an in-process stand-in for the
Hub's HTTP API (only the network is replaced)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import av
import datasets
import numpy as np
import pytest
import yaml
from conftest import FakeHub
from huggingface_hub import DatasetCard, HfApi
from PIL import Image
from typer.testing import CliRunner

from pabench.cli.datasets import app
from pabench.data.hub import DatasetMeta
from pabench.errors import PabenchError
from pabench.integrations.hub_push import files_to_push, preview_features, push_dataset


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


def _push(folder: Path, *options: str):
    result = CliRunner().invoke(app, ["push", folder.name, "--repo-id", "org/vispr2",
                                      "--data-dir", str(folder.parent), *options])
    assert result.exit_code == 0, result.output
    return result


def test_push_uploads_previews_video_metadata_and_card(built: Path, hub: FakeHub,
                                                      tmp_path: Path) -> None:
    result = _push(built, "--revision", "v1")
    assert "commit/abc" in result.output
    files = hub.files("org/vispr2", "v1")
    masters = ["data/test.parquet", "data/train.parquet", "data/val.parquet", "pabench.json",
               "videos/test/2017_2.jpg", "videos/train/2017_0.jpg", "videos/val/2017_1.jpg"]
    previews = [f"previews/{s}/{name}" for s, k in (("test", 2), ("train", 0), ("val", 1))
                for name in (f"2017_{k}.mp4", "metadata.parquet")]
    assert sorted(files) == sorted(["README.md", *masters, *previews])  # no report, no .cache
    for rel in masters:
        assert files[rel] == (built / rel).read_bytes()  # the lossless masters, untouched
    with av.open(io.BytesIO(files["previews/train/2017_0.mp4"])) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.name, stream.format.name) == ("h264", "yuv420p")
        frame = next(container.decode(video=0)).to_ndarray(format="rgb24")
    assert frame.shape == (128, 128, 3) and np.abs(frame.astype(int)).max() < 8  # black 8x8

    local = hub.copy("org/vispr2", tmp_path / "repo", "v1")
    loaded = datasets.load_dataset(str(local), cache_dir=str(tmp_path / "hf-cache"))
    features = loaded["train"].features
    assert isinstance(features["video"], datasets.Video)
    assert features["a16_race"] == datasets.ClassLabel(names=["no", "yes"])
    train = loaded["train"].cast_column("video", datasets.Video(decode=False))
    row = train[0]
    assert row["video_id"] == "2017_0" and row["a16_race"] == 1 and row["a11_tattoo"] == 0
    assert Path(row["video"]["path"]) == local / "previews/train/2017_0.mp4"

    card = DatasetCard.load(local / "README.md")
    assert card.data.task_categories == ["video-classification"]
    assert card.data.size_categories == ["n<1K"]
    assert card.data.annotations_creators == ["expert-generated"]
    assert card.data.license == DatasetCard.load(built / "README.md").data.license
    assert "## Citation" in card.text and "@" in card.text.split("## Citation")[1]


def test_second_push_deletes_stale_files_and_makes_the_repo_private(built: Path,
                                                                   hub: FakeHub) -> None:
    _push(built)
    assert hub.repos["org/vispr2"]["private"] is False
    assert "previews/val/2017_1.mp4" in hub.files("org/vispr2")
    src = built.parents[1] / "src"
    (src / "val2017.txt").write_text("")  # the val video is gone from the rebuilt dataset
    result = CliRunner().invoke(app, ["build", "vispr2", "--source", str(src),
                                      "--out", str(built.parent)])
    assert result.exit_code == 0, result.output
    _push(built, "--private")
    files = hub.files("org/vispr2")
    assert hub.repos["org/vispr2"]["private"] is True  # an existing repository too
    assert not [rel for rel in files if rel.startswith(("videos/val/", "previews/val/2017"))]
    assert "videos/train/2017_0.jpg" in files and len(hub.commits) == 2


def test_preview_features_make_attributes_yes_no() -> None:
    meta = DatasetMeta(name="d", attributes=["face"], frame_attributes=True, splits={"train": 1})
    features = datasets.Features({
        "video_id": datasets.Value("string"), "video": datasets.Value("string"),
        "masks": datasets.Value("string"), "action": datasets.ClassLabel(names=["run", "sit"]),
        "face": datasets.Value("int8"), "frames_face": datasets.List(datasets.Value("int8"), 4)})
    yes_no = datasets.ClassLabel(names=["no", "yes"])
    assert preview_features(meta, features) == datasets.Features({
        "video_id": datasets.Value("string"), "action": features["action"], "face": yes_no,
        "frames_face": datasets.List(yes_no, 4)})


@pytest.mark.fiftyone
def test_load_from_hub_reads_what_push_fiftyone_wrote(built: Path, hub: FakeHub, fo,
                                                      tmp_path: Path) -> None:
    """End to end: `datasets push --fiftyone`, then FiftyOne's own `load_from_hub` downloads
    the repo through huggingface_hub (from the stand-in) and imports it into its database."""
    from fiftyone.utils.huggingface import load_from_hub

    _push(built, "--fiftyone")
    local = hub.copy("org/vispr2", tmp_path / "repo")
    config = yaml.safe_load((local / "fiftyone.yml").read_text())
    assert config["format"] == "FiftyOneDataset" and config["name"] == "vispr2"
    assert "version" not in json.loads((local / "metadata.json").read_text())  # JSON format
    dataset = load_from_hub("org/vispr2", name="pabench-test-vispr2", overwrite=True)
    try:
        root = Path(fo.config.default_dataset_dir) / "huggingface" / "hub" / "org" / "vispr2"
        samples = {Path(s.filepath).relative_to(root).as_posix(): s for s in dataset}
        assert sorted(samples) == ["previews/test/2017_2.mp4", "previews/train/2017_0.mp4",
                                   "previews/val/2017_1.mp4"]
        for rel, sample in samples.items():  # the downloaded previews are the pushed bytes
            assert Path(sample.filepath).read_bytes() == hub.files("org/vispr2")[rel]
        train = samples["previews/train/2017_0.mp4"]
        assert train.tags == ["train"] and train.metadata.frame_width == 128
        assert [c.label for c in train["privacy"].classifications] == ["a16_race"]
    finally:
        dataset.delete()


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
