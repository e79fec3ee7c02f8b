"""Frame models the learned baselines train against, and that no protocol scores with.

VITA's protocol requires the attackers that evaluate an anonymizer to be disjoint from those it
was trained against; an anonymizer tuned against the scoring architectures would be measured on
its own training opponents. These two differ from every protocol attacker in structure, not
only in name: `tiny-vgg2d` pools with max-pooling after pairs of 3x3 convolutions (the
protocols' CNNs use strided convolutions or residual blocks), `tiny-dws2d` is built from
depthwise-separable convolutions (MobileNet's block, at pa-synth scale).

They register themselves in `pabench.models.MODELS` on import (the training code imports this
module), so recipes name them like any other model.
"""

from __future__ import annotations

import torch
from torch import nn

from pabench.models import MODELS, ModelSpec

TRAINING_ONLY = ("tiny-vgg2d", "tiny-dws2d")


def _conv(cin: int, cout: int, groups: int = 1, kernel: int = 3,
          stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


class TinyVGG2D(nn.Module):
    """Three VGG stages (two 3x3 convolutions, then 2x2 max-pooling), width 16."""

    def __init__(self, num_classes: int, width: int = 16) -> None:
        super().__init__()
        w = width
        layers: list[nn.Module] = []
        for cin, cout in ((3, w), (w, 2 * w), (2 * w, 4 * w)):
            layers += [*_conv(cin, cout), *_conv(cout, cout), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(4 * w, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class TinyDWS2D(nn.Module):
    """A stem convolution, then four depthwise-separable blocks (3x3 depthwise, 1x1 pointwise),
    two of them strided, width 24 to 96."""

    def __init__(self, num_classes: int, width: int = 24) -> None:
        super().__init__()
        w = width
        layers: list[nn.Module] = _conv(3, w)
        for cin, cout, stride in ((w, w, 1), (w, 2 * w, 2), (2 * w, 4 * w, 2), (4 * w, 4 * w, 2)):
            layers += [*_conv(cin, cin, groups=cin, stride=stride), *_conv(cin, cout, kernel=1)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(4 * w, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


for _name, _desc, _cls in (
    ("tiny-vgg2d", "3 VGG stages, max-pooling, width 16 (training-only attacker of the learned "
                   "baselines; no protocol scores with it)", TinyVGG2D),
    ("tiny-dws2d", "4 depthwise-separable blocks, width 24 (training-only attacker of the "
                   "learned baselines; no protocol scores with it)", TinyDWS2D),
):
    if _name not in MODELS:
        MODELS.add(_name, ModelSpec(_name, "frame", _desc, lambda n, s, c=_cls: c(n)))
