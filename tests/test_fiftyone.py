"""`pabench datasets view`: a tiny pa-synth split as a FiftyOne dataset, and the App's lifecycle.

FiftyOne runs on a database of the test session (the `fo` fixture), never the user's.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import av
import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from pabench.cli import app
from pabench.data import synth
from pabench.errors import PabenchError
from pabench.integrations import fiftyone_view

pytestmark = pytest.mark.fiftyone
CLIPS = 6


def _synth_pa(out: Path) -> Path:
    """synth-pa at the tiny preset's clip shape, cut to a few test clips."""
    tiny = synth.PRESETS["tiny"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(synth.PRESETS, "tiny", replace(tiny, counts={"synth-pa": {"test": CLIPS}}))
        synth.build_synth(out, preset="tiny", names=("synth-pa",), workers=1)
    return out / "synth-pa"


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _synth_pa(tmp_path_factory.mktemp("synth-view"))


def _view(*args: str) -> dict:
    result = CliRunner().invoke(app, ["datasets", "view", *args, "--no-app", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_stored_masks_are_the_rendered_ones(split: Path) -> None:
    table = pd.read_parquet(split / "data" / "test.parquet")
    for index in (0, CLIPS - 1):
        clip = synth.render_dataset_clip(0, "synth-pa", "test", index, synth.PRESETS["tiny"])
        path = split / table["masks"][index]
        person, face = synth.decode_masks(path.read_bytes(), 8, str(path))
        assert np.array_equal(person, clip.person_mask) and np.array_equal(face, clip.face_mask)
        assert person.sum() > 0
    with pytest.raises(PabenchError, match="not a mask image of 3 stacked frames"):
        synth.decode_masks(path.read_bytes(), 3, "m.png")


def test_view_without_the_extra_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from pabench.integrations.fiftyone_view import import_fiftyone

    monkeypatch.setitem(sys.modules, "fiftyone", None)  # import fails as if not installed
    with pytest.raises(PabenchError, match=r'pip install -e "\.\[fiftyone\]"'):
        import_fiftyone()


def test_view_labels_masks_slices_and_reuse(fo: ModuleType, split: Path) -> None:
    start = time.perf_counter()
    first = _view(str(split), "--anonymizer", "baseline:downsample-4x")
    built = time.perf_counter() - start
    print(f"FiftyOne view of {CLIPS} clips with an anonymized slice built in {built:.1f} s")
    assert first["samples"] == 2 * CLIPS and first["slices"] == ["raw", "anonymized"]
    assert not first["reused"] and first["name"].startswith("pabench-synth-pa-")
    dataset = fo.load_dataset(first["name"])
    assert dataset.persistent and dataset.media_type == "group"
    assert dataset.group_slices == ["raw", "anonymized"]
    table = pd.read_parquet(split / "data" / "test.parquet").set_index("video_id")
    raw = dataset.select_group_slices("raw")
    anonymized = dataset.select_group_slices("anonymized")
    assert len(raw) == len(anonymized) == CLIPS
    assert set(raw.distinct("tags")) == {"test"}
    for sample in raw:
        row = table.loc[sample["video_id"]]
        assert sample["action"].label == synth.KNOWN_ACTIONS[row["action"]]
        privacy = {c.label for c in sample["privacy"].classifications}
        assert privacy == {a for a in synth.KNOWN_ATTRIBUTES if row[a] == 1}
        m = sample.metadata
        assert (m.frame_width, m.frame_height, m.total_frame_count, m.frame_rate) == \
            (128, 128, 8, 8.0)
        with av.open(sample.filepath) as container:  # a preview browsers play
            stream = container.streams.video[0]
            assert (stream.codec_context.name, stream.format.name) == ("h264", "yuv420p")
        assert len(sample.frames) == 8
        for i, frame in sample.frames.items():
            labels = frame["privacy"].classifications if frame["privacy"] else []
            seen = {c.label for c in labels}
            assert ("face" in seen) == bool(row["frames_face"][i - 1])
            mask = frame["masks"].mask
            assert mask.shape == (32, 32) and set(np.unique(mask)) <= {0, 1, 2}
            assert (mask > 0).sum() > 0
    assert dataset.mask_targets == {"frames.masks": {1: "person", 2: "face"}}
    pair = dataset.get_group(raw.first().group.id)
    with av.open(pair["raw"].filepath) as a, av.open(pair["anonymized"].filepath) as b:
        x, y = (next(c.decode(video=0)).to_ndarray(format="rgb24") for c in (a, b))
    assert np.abs(x.astype(int) - y).mean() > 2  # a downsampled clip is not the raw one

    names = fo.list_datasets()
    again = _view(str(split), "--anonymizer", "baseline:downsample-4x")
    assert again["reused"] and again["name"] == first["name"] and fo.list_datasets() == names

    plain = _view(str(split))
    assert plain["slices"] == [] and plain["samples"] == CLIPS
    assert fo.load_dataset(plain["name"]).media_type == "video"

    changed = table.reset_index()  # an edited label is another content: a new view ...
    changed.loc[0, "action"] = (changed.loc[0, "action"] + 1) % len(synth.KNOWN_ACTIONS)
    changed.to_parquet(split / "data" / "test.parquet")
    rebuilt = _view(str(split))
    assert rebuilt["name"] != plain["name"]
    assert plain["name"] not in fo.list_datasets()  # ... that replaces the stale one
    assert first["name"] in fo.list_datasets()  # another anonymizer's view is kept


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_app_serves_and_ctrl_c_leaves_no_process(fo: ModuleType, split: Path) -> None:
    import psutil

    port = _free_port()
    start = time.perf_counter()
    # a shell starts background jobs with SIGINT ignored, and the command would inherit that
    # from a test run started that way; a terminal's Ctrl-C finds it at its default
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pabench.cli", "datasets", "view", str(split), "--port",
             str(port), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "OMP_NUM_THREADS": "1"})
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        text = b""
        while not text.rstrip().endswith(b"}"):  # printed once the App answers
            assert selector.select(timeout=max(0.0, start + 150 - time.perf_counter())), \
                "the App did not start within 150 s"
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            assert chunk, f"view exited: {proc.wait()} {proc.stderr.read()[-2000:]!r}"
            text += chunk
        served = json.loads(text)
        assert served["url"] == f"http://127.0.0.1:{port}/datasets/{served['name']}"
        print(f"App answered {time.perf_counter() - start:.1f} s after the command started")
        with urllib.request.urlopen(served["url"], timeout=10) as response:
            assert response.status == 200
        children = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert children, "the App server runs as a child of the command"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in children if _alive(pid)]
    with pytest.raises(OSError):  # nothing listens on the port any more
        urllib.request.urlopen(served["url"], timeout=5)


def test_view_shows_a_records_predictions(fo: ModuleType, split: Path, tmp_path: Path) -> None:
    """`--predictions` puts the target's and attackers' per-video scores next to the labels,
    with FiftyOne's evaluation of the action; a file of another dataset is one clear line."""
    from types import SimpleNamespace

    from pabench.evaluation.score import Predictions

    table = pd.read_parquet(split / "data" / "test.parquet")
    ids = [str(v) for v in table["video_id"]]
    clips = SimpleNamespace(name="synth-pa", split="test", video_ids=ids)
    rng = np.random.default_rng(0)
    actions = [rng.dirichlet(np.ones(len(synth.KNOWN_ACTIONS)), len(ids)) for _ in range(2)]
    attributes = list(synth.KNOWN_ATTRIBUTES)
    attacks = {"tiny2d": [rng.random((len(ids), len(attributes))) for _ in range(2)]}
    frame = Predictions((0, 1), "tiny3d", clips, list(synth.KNOWN_ACTIONS), actions, clips,
                        attributes, attacks).table()
    assert len(frame) == 2 * len(ids) * 2  # (target + one attacker) x seeds x videos
    path = tmp_path / "r.predictions.parquet"
    frame.to_parquet(path)

    name = _view(str(split), "--predictions", str(path))["name"]
    record = tmp_path / "r.json"  # the record itself names the file beside it
    assert _view(str(split), "--predictions", str(record))["name"] == name
    missing = tmp_path / "other.json"
    result = CliRunner().invoke(app, ["datasets", "view", str(split), "--predictions",
                                      str(missing), "--no-app"])
    assert result.exit_code == 1
    assert "no predictions beside this record (other.predictions.parquet)" in str(
        result.exception)
    dataset = fo.load_dataset(name)
    mean = (actions[0] + actions[1]) / 2
    for sample in dataset:
        i = ids.index(sample["video_id"])
        assert sample["action_prediction"].label == synth.KNOWN_ACTIONS[int(mean[i].argmax())]
        scores = {c.label: c.confidence for c in sample["attack_tiny2d"].classifications}
        expected = (attacks["tiny2d"][0][i] + attacks["tiny2d"][1][i]) / 2
        assert np.allclose([scores[a] for a in attributes], expected, atol=1e-6)
    assert "eval_action" in dataset.list_evaluations()
    right = sum(s["action"].label == s["action_prediction"].label for s in dataset)
    assert dataset.count_values("eval_action").get(True, 0) == right

    other = frame.assign(dataset="synth-action")
    other.to_parquet(path)
    result = CliRunner().invoke(app, ["datasets", "view", str(split), "--predictions", str(path),
                                      "--no-app"])
    assert result.exit_code == 1
    assert "no predictions for dataset 'synth-pa'" in str(result.exception)
    path.write_text("not parquet")
    result = CliRunner().invoke(app, ["datasets", "view", str(split), "--predictions", str(path),
                                      "--no-app"])
    assert result.exit_code == 1 and "not a parquet predictions file" in str(result.exception)


def test_pushed_fiftyone_files_carry_masks_and_a_repush_encodes_nothing(
        fo: ModuleType, hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`datasets push --fiftyone` gives FiftyOne's `load_from_hub` the person/face masks on
    every frame, and pushing the same build again reuses every cached preview."""
    from fiftyone.utils.huggingface import load_from_hub

    from pabench.integrations import hub_push as push

    folder = _synth_pa(tmp_path / "data")

    def push_cli(*options: str) -> None:
        result = CliRunner().invoke(app, ["datasets", "push", "synth-pa", "--repo-id",
                                          "org/synth-pa", "--data-dir", str(folder.parent),
                                          "--fiftyone", *options])
        assert result.exit_code == 0, result.output

    push_cli()
    first = hub.files("org/synth-pa")

    def encode_again(*args: object) -> None:
        raise AssertionError("a re-push encoded a preview again")

    monkeypatch.setattr(push, "encode_preview", encode_again)
    push_cli("--private")
    again = hub.files("org/synth-pa")
    previews = [rel for rel in first if rel.startswith("previews/") and rel.endswith(".mp4")]
    assert len(previews) == CLIPS and all(again[rel] == first[rel] for rel in previews)

    table = pd.read_parquet(folder / "data" / "test.parquet").set_index("video_id")
    dataset = load_from_hub("org/synth-pa", name="pabench-test-synth-pa", overwrite=True)
    try:
        assert len(dataset) == CLIPS
        for sample in dataset:
            path = folder / table.loc[sample["video_id"], "masks"]
            person, face = synth.decode_masks(path.read_bytes(), 8, str(path))
            expected = np.where(face == 1, 2, person)
            assert len(sample.frames) == 8 and expected.any()
            for i, frame in sample.frames.items():
                assert np.array_equal(frame["masks"].mask, expected[i - 1])
    finally:
        dataset.delete()


class Recording(torch.nn.Module):
    """An identity anonymizer that keeps the shape of every batch it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[list[int]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.shapes.append(list(x.shape))
        return x.clone()


def _fake(module: Recording) -> Any:
    return SimpleNamespace(module=module, name="recording", sha256="0" * 64)


@pytest.mark.fiftyone
def test_view_runs_the_anonymizer_at_the_chosen_frames_and_size(
    fo: Any, split: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = Recording()
    monkeypatch.setattr(fiftyone_view, "_load_anonymizer", lambda spec, meta: _fake(module))
    result = CliRunner().invoke(app, ["datasets", "view", str(split), "--anonymizer",
                                      "baseline:identity", "--frames", "4", "--size", "48",
                                      "--no-app", "--json"])
    assert result.exit_code == 0, result.output
    made = json.loads(result.stdout)
    assert module.shapes and all(s == [2, 3, 4, 48, 48] for s in module.shapes)  # 8 frames
    dataset = fo.load_dataset(made["name"])
    for piece in ("raw", "anonymized"):
        sample = dataset.select_group_slices(piece).first()
        assert sample.metadata.frame_width == sample.metadata.frame_height > 48  # a preview
    refused = CliRunner().invoke(app, ["datasets", "view", str(split), "--size", "0"])
    assert refused.exit_code != 0 and "--size" in refused.output
