"""The bounded-memory data path: memory-mapped stores, chunked anonymization, stamp-checked
digests, still images stored once. Datasets here are a handful of 16x16 media files."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import av
import datasets
import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from pabench.data import integrity
from pabench.data.clipset import is_still, load_clipset, resample_video
from pabench.data.hub import (
    DatasetMeta,
    decode_video,
    encode_mp4,
    split_fingerprint,
    uniform_indices,
    verify_dataset,
    write_meta,
    write_split,
)
from pabench.data.npystore import NpyWriter, open_npy, verify_npy
from pabench.errors import PabenchError
from pabench.evaluation import anonymize as anonymize_module
from pabench.evaluation.anonymize import anonymize, windows
from pabench.evaluation.data import Run
from pabench.protocols import PROTOCOLS
from pabench.submission.baseline import from_module
from pabench.training.augment import _draw, _gather


def _dataset(root: Path, n: int, still: bool = False) -> list[Path]:
    """A built folder of `n` random 16x16 media (6-frame mp4s, or pngs) in split `test`."""
    rng = np.random.default_rng(0)
    files, rows = [], []
    for i in range(n):
        path = root / "videos" / "test" / f"v{i}.{'png' if still else 'mp4'}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if still:
            Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(path)
        else:
            path.write_bytes(encode_mp4(rng.integers(0, 255, (6, 16, 16, 3), dtype=np.uint8)))
        files.append(path)
        rows.append({"video_id": f"v{i}", "video": f"videos/test/{path.name}", "action": i % 2})
    features = datasets.Features({"video_id": datasets.Value("string"),
                                  "video": datasets.Value("string"),
                                  "action": datasets.ClassLabel(names=["a", "b"])})
    write_split(root, "test", pd.DataFrame(rows), features)
    write_meta(root, DatasetMeta(name="tiny", action_classes=["a", "b"], splits={"test": n}))
    return files


class Recorder(torch.nn.Module):
    """1 - x, remembering the shape of every input it was called on."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, ...]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.append(tuple(x.shape))
        return 1 - x


def _run(tmp_path: Path, frames: int) -> Run:
    return Run(protocol=PROTOCOLS.get("known"), benchmark="real", preset="tiny",
               data_dir=tmp_path, work_dir=tmp_path / "runs", device="cpu", seeds=(0,),
               frames=frames, size=16, progress=None)


def test_store_round_trip_equals_the_in_memory_path(tmp_path: Path) -> None:
    files = _dataset(tmp_path / "ds", 5)
    clips = load_clipset(tmp_path / "ds", "test", frames=4, size=8, cache_dir=tmp_path / "c")
    expected = np.stack([resample_video(decode_video(f), 4, 8) for f in files])
    assert isinstance(clips.videos, np.memmap) and not clips.videos.flags.writeable
    np.testing.assert_array_equal(clips.videos, expected)
    again = load_clipset(tmp_path / "ds", "test", frames=4, size=8, cache_dir=tmp_path / "c")
    assert again.fingerprint == clips.fingerprint
    np.testing.assert_array_equal(again.videos, expected)
    store = next((tmp_path / "c").glob("*.npy"))
    assert verify_npy(store)


def test_store_refuses_a_file_changed_since_its_digest(tmp_path: Path) -> None:
    path = tmp_path / "a.npy"
    data = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    with NpyWriter(path, data.shape) as w:
        w.append(data[:1])
        w.append(data[1:])
        np.testing.assert_array_equal(w.finish(), data)
    np.testing.assert_array_equal(open_npy(path), data)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # same size, rewritten in place: the stamp is racy, so it is hashed again
    path.write_bytes(bytes(raw))
    assert open_npy(path) is None and not verify_npy(path)
    with pytest.raises(PabenchError, match="1 of 2 rows"), NpyWriter(tmp_path / "b.npy",
                                                                     data.shape) as w:
        w.append(data[:1])
        w.finish()
    assert not list(tmp_path.glob(".tmp-*"))  # a failed write leaves no temp file


def test_fingerprint_reuses_digests_and_sees_changes(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "ds"
    files = _dataset(root, 4)
    read: list[Path] = []
    hash_file = integrity.hash_file
    monkeypatch.setattr(integrity, "hash_file", lambda p: read.append(p) or hash_file(p))
    fresh = split_fingerprint(root, "test")
    assert len(read) == 5  # written by the build within the racy window: hashed again
    monkeypatch.setattr(integrity, "RACY_NS", 0)  # as if the files were older
    read.clear()
    assert split_fingerprint(root, "test") == fresh and read == []  # unchanged: nothing read
    with open(files[1], "ab") as f:
        f.write(b"\0")
    changed = split_fingerprint(root, "test")
    assert changed != fresh and read == [files[1]]
    read.clear()
    files[2].touch()
    assert split_fingerprint(root, "test") == changed and read == [files[2]]
    assert verify_dataset(root) == {"test": False}  # the build recorded the old content


def test_anonymized_copy_is_chunked_and_made_once(tmp_path: Path, monkeypatch) -> None:
    _dataset(tmp_path / "ds", 10)
    clips = load_clipset(tmp_path / "ds", "test", frames=6, size=16, cache_dir=tmp_path / "c")
    module = Recorder()
    sub = from_module("recorder", module)
    tracemalloc.start()
    out = anonymize(_run(tmp_path, 4), sub, clips, batch=3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    full = clips.videos.nbytes
    assert module.calls and {c[0] for c in module.calls} == {3, 1}  # batches of 3 videos
    assert len(module.calls) == 4 * len(windows(6, 4))
    assert peak < full  # never a whole-split array (the float copy alone would be 4x full)
    assert isinstance(out.videos.base, np.memmap) or isinstance(out.videos, np.memmap)
    np.testing.assert_array_equal(out.videos, 255 - np.asarray(clips.videos))
    module.calls.clear()
    again = anonymize(_run(tmp_path, 4), sub, clips, batch=3)  # a new run: the disk cache
    assert module.calls == [] and again.fingerprint == out.fingerprint
    np.testing.assert_array_equal(again.videos, out.videos)
    # outputs made under another float32 precision (TF32 before 3502ef1) are not reused
    monkeypatch.setattr(anonymize_module, "ANONYMIZER_FLOAT32", "tf32")
    anonymize(_run(tmp_path, 4), sub, clips, batch=3)
    assert module.calls


def test_still_images_are_stored_once_and_read_as_frames_and_clips(tmp_path: Path) -> None:
    files = _dataset(tmp_path / "ds", 6, still=True)
    clips = load_clipset(tmp_path / "ds", "test", frames=8, size=16, cache_dir=tmp_path / "c")
    store = next((tmp_path / "c").glob("*.npy"))
    assert open_npy(store).shape == (6, 1, 16, 16, 3)  # one frame per image on disk
    assert clips.videos.shape == (6, 8, 16, 16, 3) and is_still(clips.videos)
    images = np.stack([np.asarray(Image.open(f)) for f in files])
    rng = np.random.default_rng(0)
    idx = np.array([4, 0, 5])
    draw = _draw(idx, clips.videos.shape, "frame", 4, (), rng)
    frame = _gather(clips.videos, idx, draw.at, "frame", 4)  # what a frame attacker trains on
    np.testing.assert_array_equal(frame, images[idx].transpose(0, 3, 1, 2))
    clip = _gather(clips.videos, idx, _draw(idx, clips.videos.shape, "video", 4, (), rng).at,
                   "video", 4)
    assert clip.shape == (3, 3, 4, 16, 16) and (clip == frame[:, :, None]).all()
    module = Recorder()
    out = anonymize(_run(tmp_path, 4), from_module("recorder", module), clips)
    assert module.calls == [(6, 3, 4, 16, 16)]  # one window per image, not one per 4 frames
    assert is_still(out.videos) and out.videos.shape == clips.videos.shape
    np.testing.assert_array_equal(out.videos[:, 3], 255 - images)
    with pytest.raises(PabenchError, match="1 frames are shorter than the anonymizer's 4"):
        windows(1, 4)


def test_datasets_verify_rereads_and_names_a_changed_split(tmp_path: Path) -> None:
    """`pabench datasets verify`: ok on a fresh build; a file changed in place (same size,
    timestamps put back, so a load's stamp check cannot see it) fails with exit 1."""
    import json
    import os

    from typer.testing import CliRunner

    from pabench.cli import app

    root = tmp_path / "ds"
    files = _dataset(root, 3)
    runner = CliRunner()
    ok = runner.invoke(app, ["datasets", "verify", str(root), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout) == {"folder": str(root), "splits": {"test": True}}
    st = files[0].stat()
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    files[0].write_bytes(bytes(data))
    os.utime(files[0], ns=(st.st_atime_ns, st.st_mtime_ns))
    bad = runner.invoke(app, ["datasets", "verify", str(root)])
    assert bad.exit_code == 1 and "test: CHANGED" in bad.stdout
    assert "split(s) test no longer match" in str(bad.exception)


def _write(path: Path, fmt: str, codec: str, video: np.ndarray) -> None:
    with av.open(str(path), "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=15)
        stream.width, stream.height, stream.pix_fmt = video.shape[2], video.shape[1], "yuv420p"
        for frame in video:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        out.mux(stream.encode())


def test_sampled_decode_keeps_only_the_picked_frames_and_equals_a_whole_decode(
        tmp_path: Path) -> None:
    """avi (a frame count in its header), mkv (none: decoded whole, then picked), and an avi
    cut in half (its header promises 40 frames, 11 decode: decoded again whole)."""
    video = np.random.default_rng(0).integers(0, 255, (40, 48, 64, 3), dtype=np.uint8)
    _write(tmp_path / "a.avi", "avi", "mpeg4", video)
    _write(tmp_path / "a.mkv", "matroska", "mpeg4", video)
    data = (tmp_path / "a.avi").read_bytes()
    (tmp_path / "cut.avi").write_bytes(data[:len(data) // 2])
    for name, length in (("a.avi", 40), ("a.mkv", 40), ("cut.avi", 11)):
        whole = decode_video(tmp_path / name)
        assert len(whole) == length, name
        for frames in (16, 64):  # fewer frames than the video, and more (repeats)
            picked = decode_video(tmp_path / name, frames=frames)
            np.testing.assert_array_equal(picked, whole[uniform_indices(length, frames)])
    assert uniform_indices(3, 5).tolist() == [0, 0, 1, 2, 2]
    frame_bytes = video[0].nbytes
    for frames, bound in ((None, lambda peak: peak > 40 * frame_bytes),
                          (4, lambda peak: peak < 10 * frame_bytes)):
        tracemalloc.start()
        decode_video(tmp_path / "a.avi", frames=frames)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert bound(peak), (frames, peak, frame_bytes)
