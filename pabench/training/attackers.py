"""Frame models the learned baselines train against or are tuned on, that no protocol scores
with.

VITA's protocol requires the attackers that evaluate an anonymizer to be disjoint from those it
was trained against; an anonymizer tuned against the scoring architectures would be measured on
its own training opponents. These two differ from every protocol attacker in structure, not
only in name: `tiny-vgg2d` pools with max-pooling after pairs of 3x3 convolutions (the
protocols' CNNs use strided convolutions or residual blocks), `tiny-dws2d` is built from
depthwise-separable convolutions (MobileNet's block, at pa-synth scale).

`tiny-dense2d` (DenseNet's concatenating blocks) is the third: no recipe trains against it and
no protocol scores with it. It is the fresh attacker of the held-out privacy measure that
recipes are tuned on (`pabench.training.held_out`), so a recipe is chosen neither against its
own opponents nor against the evaluation's.

They register themselves in `pabench.models.MODELS` on import (the training code imports this
module), so recipes name them like any other model.
"""

from __future__ import annotations

import torch
from torch import nn

from pabench.models import MODELS, ModelSpec, add_frame_standardized

TRAINING_ONLY = ("tiny-vgg2d", "tiny-dws2d")
HELD_OUT_ATTACKER = "tiny-dense2d"


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


class TinyDense2D(nn.Module):
    """A stem convolution, then three dense blocks (each 3x3 layer's 12 channels concatenated
    to its input) joined by 1x1 transitions and 2x2 average pooling."""

    def __init__(self, num_classes: int, width: int = 16, growth: int = 12,
                 layers: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv(3, width))
        self.blocks = nn.ModuleList()
        self.transitions = nn.ModuleList()
        c = width
        for stage in range(3):
            self.blocks.append(nn.ModuleList(
                nn.Sequential(*_conv(c + i * growth, growth)) for i in range(layers)))
            c += layers * growth
            if stage < 2:
                self.transitions.append(nn.Sequential(*_conv(c, c // 2, kernel=1),
                                                      nn.AvgPool2d(2)))
                c //= 2
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for stage, block in enumerate(self.blocks):
            for layer in block:
                x = torch.cat([x, layer(x)], 1)
            if stage < len(self.transitions):
                x = self.transitions[stage](x)
        return self.head(x)


for _name, _desc, _cls in (
    ("tiny-vgg2d", "3 VGG stages, max-pooling, width 16 (training-only attacker of the learned "
                   "baselines; no protocol scores with it)", TinyVGG2D),
    ("tiny-dws2d", "4 depthwise-separable blocks, width 24 (training-only attacker of the "
                   "learned baselines; no protocol scores with it)", TinyDWS2D),
    ("tiny-dense2d", "3 dense blocks, growth 12 (the held-out fresh attacker learned recipes "
                     "are tuned on; nothing trains against it, no protocol scores with it)",
     TinyDense2D),
):
    if _name not in MODELS:
        MODELS.add(_name, ModelSpec(_name, "frame", _desc, lambda n, s, c=_cls: c(n)))
# from protocol v5 on the measure also reads frames standardized, as the protocol's attackers do
HELD_OUT_FRAMESTD = add_frame_standardized(HELD_OUT_ATTACKER)
