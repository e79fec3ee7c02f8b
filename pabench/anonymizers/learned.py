"""The anonymizer f_A of the learned baselines SPAct and VITA, and its training namespace.

f_A is a small per-frame U-Net (as in both papers) that also sees the clip's temporal mean: one
global temporal pooling, the lightest 3D context there is, which lets it tell static appearance
from motion. Its output is a sigmoid, so it lies in [0, 1]; it is tensor-only and exports with
torch.export and TorchScript like every other baseline.

This module holds only the network, so that the training loops (`pabench.training.methods`)
and the registered baselines (`pabench.training.baselines`) both import it without
importing each other. The class stays here: its module path is part of a baseline's sha256
(`pabench.submission.from_module`), which keys caches and records.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

TRAIN_DATASET = "anonymizer-train"  # seed namespace disjoint from every benchmark dataset
GROUPS = 4  # GroupNorm groups in f_A; widths must be multiples of it


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(GROUPS, cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(GROUPS, cout), nn.ReLU(inplace=True),
    )


class AnonymizerUNet(nn.Module):
    """Video [B, 3, T, H, W] in [0, 1] -> anonymized video of the same shape, in (0, 1).

    Each frame goes through a two-level U-Net together with the clip's temporal mean (6 input
    channels), ending in a sigmoid as in SPAct. GroupNorm rather than BatchNorm: the module is
    the same function in training and evaluation, every sample is independent of its batch,
    DDP has no buffers to sync, and early L1 reconstruction is about twice as fast as without
    normalisation (error 0.054 against 0.105 after 100 steps). Upsampling interpolates to the
    skip connection's size, so any H and W export.
    """

    trained_on: dict[str, str] | None = None
    """Where a learned baseline's weights were trained (`hardware_info`), for its record."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.enc1 = _block(6, width)
        self.enc2 = _block(width, 2 * width)
        self.mid = _block(2 * width, 2 * width)
        self.dec2 = _block(4 * width, width)
        self.dec1 = _block(2 * width, width)
        self.head = nn.Conv2d(width, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        frames = x.transpose(1, 2).reshape(b * t, c, h, w)
        mean = x.mean(dim=2, keepdim=True).expand(b, c, t, h, w)
        mean = mean.transpose(1, 2).reshape(b * t, c, h, w)
        e1 = self.enc1(torch.cat([frames, mean], 1))
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(m, size=e2.shape[-2:]), e2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, size=e1.shape[-2:]), e1], 1))
        out = torch.sigmoid(self.head(d1))
        return out.reshape(b, t, c, h, w).transpose(1, 2).contiguous()
