"""A small person/face segmenter for pa-synth, trained in-repo on the generator's own masks.

The obfuscation baselines need to know where people and faces are. On pa-synth there is no
pretrained detector, but the generator renders exact masks, so a tiny per-frame U-Net learns them
in seconds. It is trained on a seed namespace ("segmenter-train") that no benchmark split uses,
and it is cached on disk keyed by preset and `VERSION`, so every run shares one set of weights.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pabench.anonymizers.cache import load_or_train as cached
from pabench.anonymizers.cache import models_dir
from pabench.data.synth import (
    FLAT_VERSION,
    KNOWN_ACTIONS,
    NOVEL_ACTIONS,
    clip_rng,
    dataset_spec,
    get_preset,
    render_clip,
)
from pabench.data.synth.articulated import render_articulated

VERSION = "v1"  # bump when the architecture, the data or the recipe changes
TRAIN_DATASET = "segmenter-train"  # seed namespace disjoint from every benchmark dataset
HELDOUT_DATASET = "segmenter-heldout"
CHANNELS = ("person", "face")


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )


class TinyUNet(nn.Module):
    """Two-level U-Net: frames [N, 3, H, W] in [0, 1] -> logits [N, 2, H, W] (person, face).

    H and W must be divisible by 4; pa-synth frames are 32 or 64 pixels.
    """

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.enc1 = _block(3, width)
        self.enc2 = _block(width, 2 * width)
        self.mid = _block(2 * width, 4 * width)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = _block(4 * width, 2 * width)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec1 = _block(2 * width, width)
        self.head = nn.Conv2d(width, len(CHANNELS), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)


class SegmenterMasker(nn.Module):
    """Video [B, 3, T, H, W] -> hard masks [B, 2, T, H, W] in {0, 1} (person, face).

    Thresholding (and a one-pixel dilation so obfuscation also covers the anti-aliased edge)
    happens inside the module, so segmenter + obfuscation export as one tensor-only file.
    """

    def __init__(self, net: TinyUNet, dilate: int = 1) -> None:
        super().__init__()
        self.net = net.eval()
        self.dilate = dilate
        self.channels = len(CHANNELS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        frames = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        masks = (self.net(frames) > 0).to(x.dtype)
        if self.dilate > 0:
            k = 2 * self.dilate + 1
            masks = F.max_pool2d(masks, k, stride=1, padding=self.dilate)
        return masks.reshape(b, t, self.channels, h, w).permute(0, 2, 1, 3, 4)


def render_frames(preset: str, dataset: str, clips: int, seed: int = 0,
                  data_version: int = FLAT_VERSION) -> tuple[np.ndarray, ...]:
    """Frames [N, H, W, 3] uint8 and masks [N, 2, H, W] uint8 from `clips` clips of generator
    `data_version`, known and novel actions in turn."""
    p = get_preset(preset)
    actions = KNOWN_ACTIONS + NOVEL_ACTIONS
    if data_version > FLAT_VERSION:
        actions = (dataset_spec("synth-action", data_version).actions
                   + dataset_spec("synth-action-novel", data_version).actions)
    videos, masks = [], []
    for i in range(clips):
        rng = clip_rng(seed, dataset, "train", i)
        action = actions[i % len(actions)]
        clip = (render_articulated(rng, action, p.frames, p.size) if data_version > FLAT_VERSION
                else render_clip(rng, action, p.frames, p.size))
        videos.append(clip.video)
        masks.append(np.stack([clip.person_mask, clip.face_mask], 1))
    return np.concatenate(videos), np.concatenate(masks)


def _to_tensor(frames: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(frames).permute(0, 3, 1, 2).float().div(255)


@dataclass(frozen=True)
class TrainRecipe:
    clips: int
    steps: int
    batch: int = 32
    lr: float = 3e-3
    width: int = 8


RECIPES = {
    "tiny": TrainRecipe(clips=300, steps=800, batch=32),
    "standard": TrainRecipe(clips=300, steps=600, batch=16),
}


def _recipe(preset: str) -> TrainRecipe:
    get_preset(preset)  # an unknown preset gets the one-line error, not a KeyError
    return RECIPES[preset]


def train_segmenter(preset: str, seed: int = 0, recipe: TrainRecipe | None = None,
                    data_version: int = FLAT_VERSION) -> TinyUNet:
    """Train on freshly generated clips; BCE with the face channel up-weighted (it is small)."""
    recipe = recipe or _recipe(preset)
    frames, masks = render_frames(preset, TRAIN_DATASET, recipe.clips, seed, data_version)
    x_all, y_all = _to_tensor(frames), torch.from_numpy(masks).float()
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = TinyUNet(recipe.width)
    opt = torch.optim.AdamW(net.parameters(), lr=recipe.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, recipe.lr, total_steps=recipe.steps)
    pos_weight = torch.tensor([1.0, 3.0]).view(1, 2, 1, 1)
    net.train()
    for _ in range(recipe.steps):
        idx = torch.randint(len(x_all), (recipe.batch,), generator=gen)
        x, y = x_all[idx], y_all[idx]
        if torch.rand((), generator=gen) < 0.5:  # the generator's scenes are left-right symmetric
            x, y = x.flip(-1), y.flip(-1)
        loss = F.binary_cross_entropy_with_logits(net(x), y, pos_weight=pos_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return net.eval()


@torch.no_grad()
def segmenter_iou(net: TinyUNet, preset: str, clips: int = 60, dilate: int = 0,
                  data_version: int = FLAT_VERSION) -> dict[str, float]:
    """Person and face IoU (pooled over all pixels) on held-out generated clips."""
    frames, masks = render_frames(preset, HELDOUT_DATASET, clips, data_version=data_version)
    video = _to_tensor(frames).unsqueeze(0).permute(0, 2, 1, 3, 4)  # one long [1, 3, N, H, W]
    pred = SegmenterMasker(net, dilate)(video)[0].permute(1, 0, 2, 3).bool()
    true = torch.from_numpy(masks).bool()
    inter = (pred & true).sum((0, 2, 3)).float()
    union = (pred | true).sum((0, 2, 3)).float()
    return {name: float(inter[i] / union[i]) for i, name in enumerate(CHANNELS)}


def cache_path(preset: str, cache_dir: Path | None = None,
               data_version: int = FLAT_VERSION) -> Path:
    scenes = "" if data_version <= FLAT_VERSION else f"-g{data_version}"
    return models_dir(cache_dir) / f"segmenter-{preset}-{VERSION}{scenes}.pt"


def load_or_train(preset: str, cache_dir: Path | None = None,
                  data_version: int = FLAT_VERSION) -> TinyUNet:
    """The cached segmenter for `preset` and the generator's scenes (the flat figures of v1-v2
    share one); trains and caches it on first use (an unreadable or mismatching cache file is
    trained over)."""
    recipe = _recipe(preset)

    def restore(state: object) -> TinyUNet:
        net = TinyUNet(recipe.width)
        net.load_state_dict(state)  # type: ignore[arg-type]
        return net.eval()

    def train() -> TinyUNet:
        if data_version <= FLAT_VERSION:
            return train_segmenter(preset)  # the call a v1-v2 cache was trained by
        return train_segmenter(preset, data_version=data_version)

    return cached(cache_path(preset, cache_dir, data_version), restore=restore,
                  train=train, state=lambda net: net.state_dict(),
                  what=f"the pa-synth {preset} segmenter")


def train_and_measure(preset: str,
                      data_version: int = FLAT_VERSION) -> tuple[float, dict[str, float]]:
    """Train from scratch (no cache) and return (seconds, held-out IoU): for reports and tests."""
    start = time.perf_counter()
    net = train_segmenter(preset, data_version=data_version)
    return time.perf_counter() - start, segmenter_iou(net, preset, data_version=data_version)
