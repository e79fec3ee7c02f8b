"""Initial weights a protocol names: torchvision's weights enums, loaded offline.

A protocol that reproduces a paper may start a model from pretrained weights
("R3D_18_Weights.KINETICS400_V1"). pabench never downloads them: the file torchvision would
fetch must already be in `$TORCH_HOME/hub/checkpoints` (where torchvision keeps its
downloads) or in a folder given as `--weights-dir`, else a one-line error names the file and
its URL. The model reads its input normalised as the weights were trained (their own
transforms' mean and spread), and the file's sha256 enters the fit cache key.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
from torch import nn

from pabench.errors import PabenchError


def weights_enum(name: str) -> Any:
    """The torchvision weights member `name` ("R3D_18_Weights.KINETICS400_V1")."""
    import torchvision.models

    try:
        return torchvision.models.get_weight(name)
    except (ValueError, KeyError, AttributeError):
        raise PabenchError(f"weights '{name}': not a torchvision weights enum member "
                           "(e.g. R3D_18_Weights.KINETICS400_V1)") from None


def checkpoints_dir(weights_dir: Path | str | None = None) -> Path:
    """`weights_dir`, else torchvision's download folder ($TORCH_HOME/hub/checkpoints)."""
    return Path(weights_dir) if weights_dir else Path(torch.hub.get_dir()) / "checkpoints"


def weights_file(name: str, weights_dir: Path | str | None = None) -> Path:
    """The file of weights `name`, which must already be here: pabench never downloads."""
    url = weights_enum(name).url
    path = checkpoints_dir(weights_dir) / Path(urlparse(url).path).name
    if not path.is_file():
        raise PabenchError(f"{path}: weights {name} not found; fetch {url} to this path "
                           "(pabench never downloads weights)")
    return path


@functools.cache
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def weights_sha256(name: str, weights_dir: Path | str | None = None) -> str:
    """The sha256 of weights `name`'s file (hashed once per file version and process)."""
    path = weights_file(name, weights_dir)
    stat = path.stat()
    return _sha256(path, stat.st_size, stat.st_mtime_ns)


def weights_transform(name: str) -> dict[str, tuple[float, ...] | tuple[int, ...]]:
    """What the weights were trained on: `mean` and `std` per channel, `resize` and `crop`."""
    t = weights_enum(name).transforms()
    return {"mean": tuple(t.mean), "std": tuple(t.std), "resize": tuple(t.resize_size),
            "crop": tuple(t.crop_size)}


class Normalized(nn.Module):
    """`model` reading [B, 3, (T,) H, W] inputs in [0, 1] less `mean`, divided by `std` per
    channel, as its pretrained weights expect."""

    def __init__(self, model: nn.Module, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.tensor(mean).view(1, -1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, x.shape[1], *(1,) * (x.dim() - 2))
        return self.model((x - self.mean.view(shape)) / self.std.view(shape))


def pretrained(model: nn.Module, model_name: str, name: str,
               weights_dir: Path | str | None = None) -> nn.Module:
    """`model` (torchvision's `model_name`, built for its own number of classes) with weights
    `name` loaded but for its classifier, which keeps its fresh initialisation; wrapped to
    normalise its input as the weights expect."""
    import torchvision.models

    member = weights_enum(name)
    try:
        fits = type(member) is torchvision.models.get_model_weights(model_name)
    except (ValueError, KeyError):
        fits = False
    if not fits:
        raise PabenchError(f"weights '{name}' are not weights of model '{model_name}'")
    path = weights_file(name, weights_dir)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated or foreign: torch.load raises many types
        raise PabenchError(f"{path}: not a readable state dict ({type(e).__name__})") from None
    own = model.state_dict()
    keep = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape
            and k not in _classifier(model)}
    left = sorted(set(own) - set(keep) - _classifier(model))
    if left:
        raise PabenchError(f"{path}: not {name} for {model_name} ({len(left)} tensors missing "
                           f"or of another shape, e.g. {left[0]})")
    model.load_state_dict(keep, strict=False)
    t = weights_transform(name)
    return Normalized(model, t["mean"], t["std"])  # type: ignore[arg-type]


def _classifier(model: nn.Module) -> set[str]:
    """The state keys of the model's last layer with weights: the head a task replaces."""
    last = [n for n, m in model.named_modules() if isinstance(m, nn.Linear | nn.Conv2d | nn.Conv3d)]
    return {k for k in model.state_dict() if last and k.rsplit(".", 1)[0] == last[-1]}
