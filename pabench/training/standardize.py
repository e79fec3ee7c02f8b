"""Standardized inputs of attackers: protocol v4's mean image (`Standardized`, `centre_stats`)
and protocol v5's per-frame standardization (`FrameStandardized`), so that a fixed pattern, or a
grey level and contrast of each clip's own, does not blind an attacker to the signal under it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from pabench.models import MODELS

if TYPE_CHECKING:
    from pabench.training.fitting import FitSpec


class Standardized(nn.Module):
    """`model` fed its input less the mean image of its training clips (per pixel and channel),
    each channel then divided by the spread left (protocol v4). The learned baselines' pa-synth
    outputs are a fixed pattern that varies by 0.3-0.9 grey levels from clip to clip;
    convolution + BatchNorm models fed them as they are stayed at chance (validation loss
    ln 2) although a linear probe read the attributes almost as on raw clips. Scaling each
    channel alone does not help (the fixed pattern sets the spread), removing the mean image
    does; dividing each pixel by its own spread would too, but amplifies noise where raw clips
    barely vary (`python benchmarks/fixed_pattern.py --method M --stretch MODE`). The statistics
    are buffers, so cached weights carry them."""

    def __init__(self, model: nn.Module, size: int) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.zeros(3, size, size))
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, 3, *(1,) * (x.dim() - 4))
        mean = self.mean.view(*shape, *self.mean.shape[1:])
        return self.model((x - mean) / self.scale.view(*shape, 1, 1))


# a sixteenth of a grey level: a channel constant over every training clip (the black
# control) stays 0 rather than dividing by zero
MIN_STD = 1 / (255 * 16)


def to_grey_levels(x: np.ndarray, mean: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """`x` less `mean`, divided by `spread` (floored at a sixteenth of a grey level), back in
    uint8 grey levels: 128 + 40 per spread, clipped at 3.2 spreads."""
    z = (x - mean) / np.maximum(spread, 255 * MIN_STD)
    return np.clip(np.rint(128 + z * 40), 0, 255).astype(np.uint8)


class FrameStandardized:
    """uint8 videos [N, T, H, W, 3] read with each frame less its own mean per channel,
    divided by its own spread, back in grey levels (`to_grey_levels`): the input of protocol
    v5's extra attacker (`ModelSpec.frame_standardized`), ahead of v4's mean image. spact's
    seed-2 f_A gave each clip a grey level and contrast of its own; every v4 attacker stayed
    near chance on it while the same CNN on clips standardized first read the attributes
    (`python benchmarks/held_out_attack.py`). Done on read, so a memory-mapped split is never
    copied; every index keeps a frame's height, width and channels last."""

    def __init__(self, videos: np.ndarray) -> None:
        self.videos = videos
        self.shape, self.dtype = videos.shape, videos.dtype

    def __len__(self) -> int:
        return len(self.videos)

    def __getitem__(self, key: object) -> np.ndarray:
        x = np.asarray(self.videos[key], dtype=np.float32)
        return to_grey_levels(x, x.mean((-3, -2), keepdims=True),
                              x.std((-3, -2), keepdims=True))


def model_input(spec: FitSpec, videos: np.ndarray) -> np.ndarray:
    """`videos` as `spec`'s model reads them (once: validation predicts on fit's view)."""
    if MODELS.get(spec.model).frame_standardized and not isinstance(videos, FrameStandardized):
        return FrameStandardized(videos)  # type: ignore[return-value]  # indexes like one
    return videos


def centre_stats(videos: np.ndarray, chunk: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean image [3, H, W] of `videos` (uint8 [N, T, H, W, 3]) over every clip and frame,
    and each channel's spread [3] about it; read `chunk` videos at a time so a memory-mapped
    split is never copied whole."""
    total = np.zeros(videos.shape[2:])
    squares = np.zeros(videos.shape[2:])
    for i in range(0, len(videos), chunk):
        x = np.asarray(videos[i:i + chunk], dtype=np.float64) / 255
        total += x.sum((0, 1))
        squares += (x * x).sum((0, 1))
    count = videos.shape[0] * videos.shape[1]
    mean = total / count
    spread = np.sqrt(np.maximum(squares / count - mean * mean, 0.0).mean((0, 1)))
    return (torch.tensor(mean.transpose(2, 0, 1), dtype=torch.float32),
            torch.tensor(spread, dtype=torch.float32).clamp_min(MIN_STD))
