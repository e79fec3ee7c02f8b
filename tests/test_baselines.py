"""Reference baselines: downsampling, obfuscation, the pa-synth segmenter, detectors, export."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from pabench.anonymizers import BuildContext, segmenter
from pabench.anonymizers.baselines import (
    Downsample,
    Obfuscation,
    box_hull,
    build_baseline,
    expand_names,
    export_baseline,
    scaled_blur,
)
from pabench.anonymizers.segmenter import TinyUNet, cache_path, load_or_train, segmenter_iou
from pabench.data.synth import clip_rng, render_clip
from pabench.errors import PabenchError
from pabench.submission import load_submission


class InjectMasks(torch.nn.Module):
    """A masker returning given masks [B, 2, T, H, W], to test obfuscation on true masks."""

    def __init__(self, masks: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("masks", masks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.masks


@pytest.fixture(scope="module")
def clips() -> tuple[torch.Tensor, torch.Tensor]:
    """Generated 32 px clips as video [B, 3, T, H, W] and true masks [B, 2, T, H, W]."""
    # A seed namespace of its own; relationship=1 clips give two people per frame.
    rendered = [render_clip(clip_rng(7, "test-baselines", "test", i), "wave", 4, 32)
                for i in range(6)]
    video = torch.stack([torch.from_numpy(c.video) for c in rendered]).permute(0, 4, 1, 2, 3)
    masks = torch.stack([torch.from_numpy(np.stack([c.person_mask, c.face_mask]))
                         for c in rendered])
    return video.float() / 255, masks.float()


@pytest.fixture(scope="session")
def segmenter_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Train the tiny segmenter once per session into a cache folder."""
    cache = tmp_path_factory.mktemp("segmenter")
    load_or_train("tiny", cache)
    return cache


def _cc_boxes(mask: np.ndarray) -> np.ndarray:
    """Reference box hull via OpenCV's 8-connected components."""
    n, _, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    out = np.zeros_like(mask, dtype=np.uint8)
    for x, y, w, h, _ in stats[1:n]:
        out[y : y + h, x : x + w] = 1
    return out


def test_all_lists_every_baseline_identity_first() -> None:
    names = expand_names("all")
    assert names[0] == "identity"
    # controls x3, downsample x4, black x1 + blur x2 strengths per {box, seg} x {face, body},
    # learned x6 (spact, penalty, vita, vita-grl, vita-kbeam, mppar)
    assert len(names) == 1 + 3 + 4 + 4 + 8 + 6 == len(set(names))
    assert names[1:4] == ["invert", "channel-permute", "black"]
    assert {"downsample-16x", "seg-blur-body-weak", "box-black-face", "spact"} <= set(names)
    assert expand_names("downsample-2x,box-black-body") == ["downsample-2x", "box-black-body"]


def test_unknown_baseline_suggests_closest() -> None:
    with pytest.raises(PabenchError, match="Did you mean 'box-blur-face-strong'"):
        expand_names("box-blur-face-strnog")


def test_downsample_keeps_shape_and_removes_high_frequencies() -> None:
    x = torch.rand(2, 3, 4, 32, 32)
    for f in (2, 4, 8, 16):
        y = Downsample(f)(x)
        assert y.shape == x.shape and 0 <= y.min() and y.max() <= 1
        blocks = y.unfold(3, f, f).unfold(4, f, f)  # each f x f block is one low-res pixel
        assert torch.allclose(blocks, blocks[..., :1, :1].expand_as(blocks))
        assert torch.allclose(blocks[..., 0, 0], x.unfold(3, f, f).unfold(4, f, f).mean((-1, -2)),
                              atol=1e-6)
    checker = ((torch.arange(32)[:, None] + torch.arange(32)) % 2).float().expand(1, 3, 2, 32, 32)
    assert torch.allclose(Downsample(2)(checker), torch.full_like(checker, 0.5))


def test_box_hull_matches_connected_component_boxes(clips) -> None:
    _, masks = clips
    flat = masks.permute(0, 2, 1, 3, 4).reshape(-1, 2, 32, 32)
    for channel in (0, 1):
        region = flat[:, channel : channel + 1]
        got = box_hull(region, 12)[:, 0].numpy()
        for g, m in zip(got, region[:, 0].numpy(), strict=True):
            assert np.array_equal(g, _cc_boxes(m))


@pytest.mark.parametrize("target", ["face", "body"])
@pytest.mark.parametrize("shape", ["box", "seg"])
def test_blackening_zeroes_the_region_only(clips, target, shape) -> None:
    video, masks = clips
    out = Obfuscation(InjectMasks(masks), target, shape, "black", frame_size=32)(video)
    channel = 0 if target == "body" else 1
    region = masks[:, channel]
    if shape == "box":
        b, t = region.shape[:2]
        region = box_hull(region.reshape(b * t, 1, 32, 32), 12).reshape(b, t, 32, 32)
        assert (region >= masks[:, channel]).all()
    inside = region.bool()[:, None].expand_as(video)
    assert inside.any() and (out[inside] == 0).all()
    assert torch.equal(out[~inside], video[~inside])


@pytest.mark.parametrize("strength", [(21, 10.0), (13, 10.0)])
def test_blur_changes_the_region_only(clips, strength) -> None:
    video, masks = clips
    out = Obfuscation(InjectMasks(masks), "body", "seg", "blur", *strength, frame_size=32)(video)
    inside = masks[:, 0].bool()[:, None].expand_as(video)
    assert torch.equal(out[~inside], video[~inside])
    assert (out[inside] - video[inside]).abs().mean() > 0.02
    assert 0 <= out.min() and out.max() <= 1


def test_blur_kernel_scales_with_frame_size() -> None:
    assert scaled_blur(21, 10.0, 112) == (21, 10.0)
    assert scaled_blur(21, 10.0, 32)[0] == 7 and scaled_blur(13, 10.0, 32)[0] == 5
    assert scaled_blur(21, 10.0, 64)[0] == 13 and scaled_blur(13, 10.0, 64)[0] == 7


def test_segmenter_iou_on_heldout_clips(segmenter_dir) -> None:
    iou = segmenter_iou(load_or_train("tiny", segmenter_dir), "tiny")
    assert iou["person"] >= 0.75 and iou["face"] >= 0.75, iou


def test_segmenter_baseline_blackens_people(segmenter_dir, clips) -> None:
    video, masks = clips
    ctx = BuildContext(benchmark="pa-synth", preset="tiny", cache_dir=segmenter_dir)
    out = build_baseline("seg-black-body", ctx)(video)
    person = masks[:, 0].bool()[:, None].expand_as(video)
    assert (out[person] == 0).float().mean() > 0.9  # the segmenter finds (nearly) every person
    assert (out[~person] == 0).float().mean() < 0.2


@pytest.mark.parametrize("name,fmt", [
    ("box-blur-face-strong", "torchscript"), ("seg-black-body", "torch.export"),
    ("downsample-4x", "torch.export"),
])
def test_export_round_trip(segmenter_dir, clips, tmp_path, name, fmt) -> None:
    video, _ = clips
    ctx = BuildContext(benchmark="pa-synth", preset="tiny", cache_dir=segmenter_dir)
    path = export_baseline(name, tmp_path / f"exported-{name}.pt2", ctx=ctx, fmt=fmt)
    loaded = load_submission(path)
    assert loaded.format == fmt
    with torch.no_grad():
        assert torch.allclose(loaded.module(video), build_baseline(name, ctx)(video), atol=1e-5)


def test_opencv_baseline_is_not_exportable(tmp_path) -> None:
    with pytest.raises(PabenchError, match="cannot be exported"):
        export_baseline("box-black-face", tmp_path / "x.pt2",
                        ctx=BuildContext(benchmark="real", preset="tiny"))


def test_opencv_face_box_covers_the_astronauts_face() -> None:
    skimage_data = pytest.importorskip("skimage.data")
    from pabench.anonymizers.detectors import OpenCVDetector

    found = OpenCVDetector().detect(skimage_data.astronaut())
    # Eyes to chin of the astronaut, read off the 512 x 512 image.
    assert any(x0 <= 185 and y0 <= 85 and x1 >= 260 and y1 >= 155 and (x1 - x0) < 150
               for x0, y0, x1, y1 in found.face_boxes), found.face_boxes
    assert found.face_mask[120, 220] == 1 and found.person_mask[120, 220] == 1


def test_opencv_face_blackening_on_a_photo() -> None:
    skimage_data = pytest.importorskip("skimage.data")
    img = torch.from_numpy(skimage_data.astronaut()).permute(2, 0, 1).float() / 255
    video = img[None, :, None]  # [1, 3, 1, H, W]
    out = build_baseline("box-black-face", BuildContext(benchmark="real"))(video)
    assert (out[0, :, 0, 90:150, 190:255] == 0).all()
    assert torch.equal(out[0, :, 0, 300:], video[0, :, 0, 300:])


def test_torchvision_detector_loads_local_weights(tmp_path) -> None:
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn

    from pabench.anonymizers.detectors import TorchvisionDetector

    torch.manual_seed(0)
    weights = tmp_path / "det.pt"
    torch.save(fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None)
               .state_dict(), weights)
    found = TorchvisionDetector(weights).detect(np.zeros((96, 128, 3), np.uint8))
    assert found.person_mask.shape == found.face_mask.shape == (96, 128)
    assert found.person_boxes.shape[1] == 4

    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    for path in (tmp_path / "missing.pt", tmp_path / "bad.pt"):
        with pytest.raises(PabenchError) as e:
            TorchvisionDetector(path)
        assert "\n" not in str(e.value)


def test_registry_is_complete_whatever_was_imported() -> None:
    """A fresh interpreter that imports only the package sees every baseline on first lookup."""
    code = ("import sys; from pabench.anonymizers import ANONYMIZERS; "
            "assert 'pabench.training.baselines' not in sys.modules; "
            "print(','.join(ANONYMIZERS.names()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    names = out.stdout.strip().split(",")
    assert {"identity", "downsample-4x", "seg-blur-body-weak", "spact", "vita"} <= set(names)
    assert len(names) == 26 == len(expand_names("all"))
    assert names[0] == "identity" and expand_names("all")[-6:] == [
        "spact", "penalty", "vita", "vita-grl", "vita-kbeam", "mppar"]


@pytest.mark.parametrize("corrupt", ["text", "other-architecture"])
def test_corrupt_segmenter_cache_is_trained_over(tmp_path, monkeypatch, caplog, corrupt) -> None:
    path = cache_path("tiny", tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if corrupt == "text":
        path.write_text("not a checkpoint")
    else:
        torch.save(TinyUNet(width=4).state_dict(), path)
    torch.manual_seed(3)
    fresh = TinyUNet().eval()
    monkeypatch.setattr(segmenter, "train_segmenter", lambda preset: fresh)
    with caplog.at_level(logging.INFO, logger="pabench"):
        assert load_or_train("tiny", tmp_path) is fresh
    assert "unreadable cache" in caplog.text
    assert "training the pa-synth tiny segmenter" in caplog.text
    monkeypatch.setattr(segmenter, "train_segmenter", lambda preset: pytest.fail("retrained"))
    cached = load_or_train("tiny", tmp_path)  # the file was replaced by the fresh weights
    for key, value in fresh.state_dict().items():
        assert torch.equal(cached.state_dict()[key], value)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind


def test_export_format_is_checked_before_building(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(segmenter, "train_segmenter", lambda preset: pytest.fail("built"))
    with pytest.raises(PabenchError, match="unknown export format 'onnx'"):
        export_baseline("seg-black-body", tmp_path / "x.pt2", fmt="onnx",
                        ctx=BuildContext(preset="tiny", cache_dir=tmp_path / "empty"))


def test_build_context_resolves_auto_and_refuses_unknown_presets() -> None:
    assert BuildContext().preset == "tiny" and BuildContext(preset="standard").preset == "standard"
    with pytest.raises(PabenchError, match="unknown preset 'huge'"):
        BuildContext(preset="huge")


def test_the_segmenter_of_generator_v3_is_its_own(tmp_path):
    """Protocol v7's obfuscation baselines find people with a segmenter trained on generator
    v3's clips, cached apart; the flat figures of v1-v2 keep the file they always had."""
    from pabench.anonymizers.segmenter import cache_path, render_frames

    assert cache_path("tiny", tmp_path).name == "segmenter-tiny-v1.pt"
    assert cache_path("tiny", tmp_path, 2) == cache_path("tiny", tmp_path)
    assert cache_path("tiny", tmp_path, 3).name == "segmenter-tiny-v1-g3.pt"
    flat, _ = render_frames("tiny", "segmenter-train", 2)
    v3, masks = render_frames("tiny", "segmenter-train", 2, data_version=3)
    assert flat.shape == v3.shape and not np.array_equal(flat, v3) and masks[:, 0].any()
