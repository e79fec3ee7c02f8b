"""Model zoo for utility targets (video models) and privacy attackers (frame models).

Small builders in torchvision's manner: `build_model(name, num_classes, input_size)` returns a
fresh, randomly initialised network (weights=None): every model a protocol scores with is
trained on the data it judges, from scratch unless the protocol names initial weights
(`pabench.models.weights`, read offline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from pabench.registry import Registry

Kind = Literal["video", "frame"]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: Kind  # video: [B, 3, T, H, W]; frame: [B, 3, H, W]
    description: str
    build: Callable[[int, int], nn.Module]  # (num_classes, input_size) -> module
    # a floor under the worst case, not a contender for the strongest attacker: weak on raw
    # data by design, so the protocol's strength floor does not apply to it
    probe: bool = False
    # reads each frame standardized by its own statistics (`pabench.training.FrameStandardized`)
    frame_standardized: bool = False


MODELS: Registry[ModelSpec] = Registry("model")


def _block3d(cin: int, cout: int, stride: tuple[int, int, int]) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm3d(cout), nn.ReLU(inplace=True),
    )


class Tiny3D(nn.Module):
    """Four 3D conv blocks on the clip minus its temporal mean: removing the static appearance
    first makes motion learnable in a few epochs on CPU (10 epochs without it barely beat
    chance on pa-synth tiny). `motion_only=False` keeps appearance: the video attacker."""

    def __init__(self, num_classes: int, width: int = 16, motion_only: bool = True) -> None:
        super().__init__()
        w = width
        self.motion_only = motion_only
        self.features = nn.Sequential(
            _block3d(3, w, (1, 2, 2)), _block3d(w, 2 * w, (1, 1, 1)),
            _block3d(2 * w, 4 * w, (2, 2, 2)), _block3d(4 * w, 4 * w, (2, 2, 2)),
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Dropout(0.2),
                                  nn.Linear(4 * w, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x - x.mean(dim=2, keepdim=True) if self.motion_only
                                       else x))


class TwoStream(nn.Module):
    """Tiny3D's motion stream (the clip minus its temporal mean) beside Tiny2D's stack on the
    clip's middle frame, their pooled features joined: an action model that sees the scene
    around the person, as real video's targets do, where appearance fed to the 3D stack alone
    does not learn within the budget (tiny3d-whole: 6.2 validation top-1 on generator v4)."""

    def __init__(self, num_classes: int, width: int = 16) -> None:
        super().__init__()
        self.motion = Tiny3D(num_classes, width).features
        self.scene = Tiny2D(num_classes, width).features
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(8 * width, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        motion = self.motion(x - x.mean(dim=2, keepdim=True)).mean(dim=(2, 3, 4))
        scene = self.scene(x[:, :, x.shape[2] // 2]).mean(dim=(2, 3))
        return self.head(torch.cat([motion, scene], 1))


class TinyR2Plus1D(nn.Module):
    """Factorised (2+1)D blocks: a spatial 1x3x3 conv then a temporal 3x1x1 conv, on the whole
    clip (appearance kept): a video attacker of another inductive bias than tiny-c3d."""

    def __init__(self, num_classes: int, width: int = 24) -> None:
        super().__init__()
        w = width
        layers: list[nn.Module] = []
        for cin, cout, stride in ((3, w, (1, 2, 2)), (w, 2 * w, (1, 1, 1)),
                                  (2 * w, 4 * w, (2, 2, 2)), (4 * w, 4 * w, (2, 2, 2))):
            layers += [nn.Conv3d(cin, cout, (1, 3, 3), (1, *stride[1:]), (0, 1, 1), bias=False),
                       nn.BatchNorm3d(cout), nn.ReLU(inplace=True),
                       nn.Conv3d(cout, cout, (3, 1, 1), (stride[0], 1, 1), (1, 0, 0),
                                 bias=False),
                       nn.BatchNorm3d(cout), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                                  nn.Linear(4 * w, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def _block2d(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )


class Tiny2D(nn.Module):
    """Plain 2D conv stack; the frame attacker that most anonymizers are tuned against."""

    def __init__(self, num_classes: int, width: int = 16) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            _block2d(3, w, 1), _block2d(w, 2 * w, 2), _block2d(2 * w, 4 * w, 2),
            _block2d(4 * w, 4 * w, 2),
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(4 * w, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class _Residual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.skip = (nn.Identity() if stride == 1 and cin == cout else
                     nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class TinyResNet2D(nn.Module):
    """A ResNet-style attacker at pa-synth scale (a different inductive bias from Tiny2D)."""

    def __init__(self, num_classes: int, width: int = 16) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            _block2d(3, w, 1), _Residual(w, w, 1), _Residual(w, 2 * w, 2),
            _Residual(2 * w, 4 * w, 2),
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(4 * w, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class TinySlow3D(nn.Module):
    """TinyResNet2D's blocks on every frame, then a 3x3x3 block across frames: the early stages
    of SlowFast's slow pathway have no temporal kernel either. A video attacker that sees
    appearance at full resolution (tiny-c3d halves it first and mixes frames from the first
    layer) and how it changes over the clip. `stride` 2 reads every second frame, as the slow
    pathway reads a low frame rate: half the FLOPs."""

    def __init__(self, num_classes: int, width: int = 16, stride: int = 1) -> None:
        super().__init__()
        self.stride = stride
        self.frames = TinyResNet2D(num_classes, width).features
        self.temporal = _block3d(4 * width, 4 * width, (1, 1, 1))
        self.head = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                                  nn.Linear(4 * width, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :, ::self.stride]
        b, c, t, h, w = x.shape
        f = self.frames(x.transpose(1, 2).reshape(b * t, c, h, w))
        f = f.view(b, t, *f.shape[1:]).transpose(1, 2)  # [B, C', T, h', w']
        return self.head(self.temporal(f))


def _temporal_shift(f: torch.Tensor, frames: int) -> torch.Tensor:
    """TSM's shift (Lin et al., ICCV 2019) on per-frame features [B*T, C, H, W]: an eighth of
    the channels comes from the previous frame, an eighth from the next (zero at the ends)."""
    bt, c, h, w = f.shape
    v, k = f.view(bt // frames, frames, c, h, w), c // 8
    out = torch.zeros_like(v)
    out[:, 1:, :k] = v[:, :-1, :k]
    out[:, :-1, k:2 * k] = v[:, 1:, k:2 * k]
    out[:, :, 2 * k:] = v[:, :, 2 * k:]
    return out.view(bt, c, h, w)


class TinyTSM(nn.Module):
    """A 2D conv stack on every frame with a temporal shift before each block after the first:
    a video attacker at frame-model cost that mixes neighbouring frames without 3D kernels
    and without early downsampling (TSM's idea at pa-synth scale)."""

    def __init__(self, num_classes: int, width: int = 32) -> None:
        super().__init__()
        w = width
        self.blocks = nn.ModuleList([_block2d(3, w, 1), _block2d(w, 2 * w, 2),
                                     _block2d(2 * w, 4 * w, 2), _block2d(4 * w, 4 * w, 2)])
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        f = x.transpose(1, 2).reshape(b * t, c, h, w)
        for i, block in enumerate(self.blocks):
            f = block(_temporal_shift(f, t) if i else f)
        return self.head(f.mean((2, 3)).view(b, t, -1).mean(1))


class C3D(nn.Module):
    """C3D (Tran et al. 2015) with global pooling so it accepts any clip size."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        cfg = [(3, 64, (1, 2, 2)), (64, 128, (2, 2, 2)), (128, 256, None), (256, 256, (2, 2, 2)),
               (256, 512, None), (512, 512, (2, 2, 2)), (512, 512, None), (512, 512, (2, 2, 2))]
        layers: list[nn.Module] = []
        for cin, cout, pool in cfg:
            layers += [nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU(inplace=True)]
            if pool:
                layers.append(nn.MaxPool3d(pool, pool))
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(512, 4096),
                                  nn.ReLU(True), nn.Dropout(0.5), nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def _tiny_vit(num_classes: int, size: int) -> nn.Module:
    from torchvision.models import VisionTransformer

    patch = 4 if size <= 32 else 8
    return VisionTransformer(image_size=size, patch_size=patch, num_layers=4, num_heads=4,
                                 hidden_dim=64, mlp_dim=128, num_classes=num_classes)


class TinyConvViT(nn.Module):
    """A ViT whose patch embedding is a small conv stem (Xiao et al. 2021, "Early Convolutions
    Help Transformers See Better"): tiny-vit2d's encoder, but tokens from stride-2 3x3
    convolutions instead of one linear 4x4 patch, so it does not plateau at pa-synth's size."""

    def __init__(self, num_classes: int, size: int, dim: int = 64) -> None:
        from torchvision.models.vision_transformer import Encoder

        super().__init__()
        strides = (1, 2, 2) if size <= 32 else (2, 2, 2)  # 8x8 tokens at 32 px, 8x8 at 64
        chans = (3, dim // 2, dim, dim)
        self.stem = nn.Sequential(*[_block2d(chans[i], chans[i + 1], s)
                                    for i, s in enumerate(strides)])
        tokens = size
        for s in strides:  # a 3x3 conv with padding 1 rounds up
            tokens = -(-tokens // s)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.encoder = Encoder(
            seq_length=tokens * tokens + 1, num_layers=4, num_heads=4, hidden_dim=dim,
            mlp_dim=2 * dim, dropout=0.0, attention_dropout=0.0)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.stem(x).flatten(2).transpose(1, 2)  # [B, tokens, dim]
        t = self.encoder(torch.cat([self.cls.expand(len(t), -1, -1), t], 1))
        return self.head(t[:, 0])


class LinearProbe(nn.Module):
    """Logistic regression on each clip's 8x8-pooled colour mean and temporal spread, every
    feature standardized (BatchNorm without affine parameters). Weak on raw clips, but nothing
    a fixed pattern does to the pixels' scale can blind it: the learned baselines' outputs
    left the convolutional attackers at chance while this probe read the attributes almost as
    on raw clips (`python benchmarks/fixed_pattern.py --method M --probe`)."""

    def __init__(self, num_classes: int, grid: int = 8) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(grid)
        self.norm = nn.BatchNorm1d(2 * 3 * grid * grid, affine=False)
        self.head = nn.Linear(2 * 3 * grid * grid, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, spread = x.mean(2), x.std(2, unbiased=False)  # [B, 3, H, W] each
        f = torch.cat([self.pool(mean).flatten(1), self.pool(spread).flatten(1)], 1)
        return self.head(self.norm(f))


def _tv(name: str, **options: float) -> Callable[[int, int], nn.Module]:
    """torchvision's `name` (with builder `options`), untrained. torchvision is imported on
    first use: it costs seconds (torch._dynamo through torchvision.ops) that a command building
    only pabench's own models need not pay."""

    def build(n: int, size: int) -> nn.Module:
        import torchvision.models

        return torchvision.models.get_model(name, weights=None, num_classes=n, **options)

    return build


def _vit(n: int, size: int) -> nn.Module:
    import torchvision.models

    return torchvision.models.vit_b_16(weights=None, num_classes=n,
                                       image_size=max(224, size // 16 * 16))


for _name, _kind, _desc, _build in [
    ("tiny3d", "video", "4-block 3D CNN, width 16 (pa-synth target)",
     lambda n, s: Tiny3D(n)),
    ("tiny3d-whole", "video", "tiny3d on the whole clip, appearance kept (a pa-synth target "
     "candidate, not adopted)", lambda n, s: Tiny3D(n, motion_only=False)),
    ("tiny3d-twostream", "video", "tiny3d's motion stream beside a 2D stream on the middle "
     "frame (a pa-synth target candidate, not adopted)",
     lambda n, s: TwoStream(n)),
    ("tiny-c3d", "video", "4-block 3D CNN, width 24, on the whole clip (pa-synth video "
     "attacker: sees appearance and how it changes across frames)",
     lambda n, s: Tiny3D(n, 24, motion_only=False)),
    ("tiny-slow3d", "video", "tiny-resnet2d's blocks per frame, then a 3x3x3 block across "
     "frames (a video attacker that keeps full-resolution appearance)",
     lambda n, s: TinySlow3D(n)),
    ("tiny-slow3d-s2", "video", "tiny-slow3d on every second frame, half its FLOPs (a video "
     "attacker candidate, not adopted)",
     lambda n, s: TinySlow3D(n, stride=2)),
    ("tiny-r2plus1d", "video", "4 factorised (2+1)D blocks, width 24, on the whole clip "
     "(unseen pa-synth video attacker)", lambda n, s: TinyR2Plus1D(n)),
    ("tiny-tsm", "video", "4-block 2D CNN, width 32, on every frame with temporal shifts "
     "between blocks (a video attacker of TSM's kind)", lambda n, s: TinyTSM(n)),
    ("tiny2d", "frame", "4-block 2D CNN, width 16 (pa-synth attacker)", lambda n, s: Tiny2D(n)),
    ("tiny2d-wide", "frame", "4-block 2D CNN, width 48 (unseen attacker)",
     lambda n, s: Tiny2D(n, 48)),
    ("tiny-resnet2d", "frame", "3-stage residual 2D CNN (pa-synth attacker)",
     lambda n, s: TinyResNet2D(n)),
    ("tiny-vit2d", "frame", "4-layer ViT, dim 64 (unseen attacker)", _tiny_vit),
    ("tiny-convvit2d", "frame", "tiny-vit2d's encoder on a 3-layer conv stem (a transformer "
     "attacker that reaches the CNNs on raw pa-synth)", lambda n, s: TinyConvViT(n, s)),
    ("linear-probe", "video", "logistic regression on 8x8-pooled colour mean and temporal "
     "spread, features standardized (a floor under the worst case)",
     lambda n, s: LinearProbe(n)),
    ("c3d", "video", "C3D with global pooling", lambda n, s: C3D(n)),
    ("r3d_18", "video", "torchvision R3D-18", _tv("r3d_18")),
    ("r2plus1d_18", "video", "torchvision R(2+1)D-18", _tv("r2plus1d_18")),
    ("mc3_18", "video", "torchvision MC3-18", _tv("mc3_18")),
    ("s3d", "video", "torchvision S3D", _tv("s3d")),
    ("mvit_v2_s", "video", "torchvision MViT-V2-S (16x224x224 clips)", _tv("mvit_v2_s")),
    ("resnet18", "frame", "torchvision ResNet-18", _tv("resnet18")),
    ("resnet34", "frame", "torchvision ResNet-34", _tv("resnet34")),
    ("resnet50", "frame", "torchvision ResNet-50", _tv("resnet50")),
    ("resnet101", "frame", "torchvision ResNet-101", _tv("resnet101")),
    ("resnet152", "frame", "torchvision ResNet-152", _tv("resnet152")),
    ("mobilenet_v2", "frame", "torchvision MobileNet-V2", _tv("mobilenet_v2")),
    ("mobilenet_v3_small", "frame", "torchvision MobileNet-V3-Small", _tv("mobilenet_v3_small")),
    ("mobilenet_v3_large", "frame", "torchvision MobileNet-V3-Large", _tv("mobilenet_v3_large")),
    ("shufflenet_v2_x0_5", "frame", "torchvision ShuffleNet-V2 x0.5", _tv("shufflenet_v2_x0_5")),
    ("efficientnet_b0", "frame", "torchvision EfficientNet-B0", _tv("efficientnet_b0")),
    ("vit_b_16", "frame", "torchvision ViT-B/16", _vit),
]:
    MODELS.add(_name, ModelSpec(_name, _kind, _desc, _build, probe=_name == "linear-probe"))

# MobileNet-V2 at other width multipliers: the family VITA and MPPAR draw their training
# attackers from (`mobilenet_v2` is width 1.0)
for _width in ("0_35", "0_5", "0_6", "0_75", "0_85", "1_1", "1_3", "1_4"):
    _name = f"mobilenet_v2_x{_width}"
    MODELS.add(_name, ModelSpec(_name, "frame", f"torchvision MobileNet-V2, width multiplier "
                                f"{_width.replace('_', '.')}",
                                _tv("mobilenet_v2", width_mult=float(_width.replace("_", ".")))))


def add_frame_standardized(base: str) -> str:
    """Register `BASE-framestd`, `base` reading each frame standardized by its own mean and
    spread per channel (protocol v5's extra attacker, which an offset or contrast that
    differs between clips does not blind); returns its name."""
    name, spec = f"{base}-framestd", MODELS.get(base)
    if name not in MODELS:
        MODELS.add(name, ModelSpec(name, spec.kind, f"{spec.description}, reading each frame "
                                   "standardized by its own mean and spread per channel",
                                   spec.build, frame_standardized=True))
    return name


for _base in ("tiny2d-wide", "tiny-resnet2d", "resnet18"):
    add_frame_standardized(_base)


def build_model(name: str, num_classes: int, input_size: int, weights: str | None = None,
                weights_dir: str | None = None) -> nn.Module:
    """A fresh model; with `weights` (a torchvision weights enum member, `pabench.models.
    weights`) started from them, read offline, but for a freshly initialised classifier."""
    model = MODELS.get(name).build(num_classes, input_size)
    if weights is None:
        return model
    from pabench.models.weights import pretrained

    return pretrained(model, name, weights, weights_dir)
