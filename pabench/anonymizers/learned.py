"""Learned anonymizers: the field's reference methods SPAct and VITA, trained in-repo on pa-synth.

The anonymizer f_A is a small per-frame U-Net (as in both papers) that also sees the clip's
temporal mean: one global temporal pooling, the lightest 3D context there is, which lets it tell
static appearance from motion. Its output is a sigmoid, so it lies in [0, 1]; it is tensor-only
and exports with torch.export and TorchScript like every other baseline.

`baseline:spact` and `baseline:vita` train on first use for the requested preset (recipes in
`pabench.training.anonymizer`, loops there too) on clips rendered from a seed namespace no
benchmark split uses, with known actions only (and, for VITA, known attributes only), and cache
the weights under `BuildContext.cache_dir` keyed by preset, `VERSION` and a hash of the recipe.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from pabench.anonymizers import ANONYMIZERS, AnonymizerSpec, BuildContext
from pabench.data.synth import KNOWN_ACTIONS, KNOWN_ATTRIBUTES, PRESETS
from pabench.errors import PabenchError, unknown_name
from pabench.runtime import rank_world
from pabench.submission import TrainingData

if TYPE_CHECKING:
    from pabench.training.anonymizer import Log, Progress, Recipe, TrainResult

VERSION = "v1"  # bump when the architecture, the training data or the training code changes
TRAIN_DATASET = "anonymizer-train"  # seed namespace disjoint from every benchmark dataset
DECLARED_DATASET = f"pa-synth-{TRAIN_DATASET}"
GROUPS = 4  # GroupNorm groups in f_A; widths must be multiples of it
PAPERS = {
    "spact": "https://arxiv.org/abs/2203.15205",
    "vita": "https://arxiv.org/abs/1906.05675",
}


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


def training_data(method: str) -> TrainingData:
    """What a learned baseline sees in training: known actions always; VITA's supervised
    attackers also see the known attributes, SPAct's self-supervised branch no labels."""
    attributes = list(KNOWN_ATTRIBUTES) if method == "vita" else []
    return TrainingData(datasets=[DECLARED_DATASET], action_classes=list(KNOWN_ACTIONS),
                        attributes=attributes)


def recipe_digest(recipe: Recipe) -> str:
    return hashlib.sha256(recipe.model_dump_json().encode()).hexdigest()[:12]


def cache_path(method: str, preset: str, recipe: Recipe, cache_dir: Path | None = None) -> Path:
    from pabench.runtime import pabench_home

    root = cache_dir if cache_dir is not None else pabench_home() / "models"
    return root / f"{method}-{preset}-{VERSION}-{recipe_digest(recipe)}.pt"


def _read_cache(path: Path, width: int) -> TrainResult | None:
    """The cached result, or None when the file is missing or unreadable (a pure cache of a
    deterministic recipe: it is retrained and overwritten)."""
    from pabench.training.anonymizer import TrainResult

    if not path.is_file():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
        net = AnonymizerUNet(width)
        net.load_state_dict(payload["weights"])
        return TrainResult(net.eval(), payload["losses"], cached=True)
    except (RuntimeError, OSError, EOFError, ValueError, KeyError, TypeError):
        return None


def _write_cache(path: Path, result: TrainResult) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save({"weights": result.net.state_dict(), "losses": result.losses}, tmp)
    os.replace(tmp, path)  # atomic, so concurrent runs never read half a file


def load_or_train(method: str, preset: str, *, recipe: Recipe | None = None,
                  cache_dir: Path | None = None, device: str = "cpu",
                  progress: Progress | None = None, log: Log | None = None) -> TrainResult:
    """The trained anonymizer for `method` on `preset`, from the cache or trained now (the
    default recipe unless one is given). Without a `log`, a one-line note on stderr says why
    the first build takes minutes. Under torchrun every rank trains its share (DDP) and rank 0
    writes the cache.
    """
    from pabench.training.anonymizer import default_recipe, train_anonymizer

    if preset not in PRESETS:
        raise unknown_name("preset", preset, PRESETS)
    recipe = recipe if recipe is not None else default_recipe(method)
    path = cache_path(method, preset, recipe, cache_dir)
    cached = _read_cache(path, recipe.width)
    if cached is not None:
        return cached
    if log is None and rank_world()[0] == 0:
        print(f"training baseline '{method}' for pa-synth {preset} (first use, minutes on a "
              f"CPU; cached in {path})", file=sys.stderr)
    result = train_anonymizer(recipe, preset, device=device, progress=progress, log=log)
    if rank_world()[0] == 0:
        _write_cache(path, result)
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    return result


def _build(method: str, ctx: BuildContext) -> nn.Module:
    if ctx.benchmark != "pa-synth":
        raise PabenchError(f"baseline '{method}' is trained on pa-synth only; evaluate it with "
                           "--benchmark pa-synth")
    net = load_or_train(method, ctx.preset, cache_dir=ctx.cache_dir, device=ctx.device).net
    return net.to(ctx.device).eval()


for _method, _desc in (
    ("spact", "SPAct (Dave et al., CVPR 2022): U-Net f_A trained against a self-supervised "
              "NT-Xent privacy branch, no privacy labels"),
    ("vita", "VITA (Wu et al., TPAMI): U-Net f_A trained against a supervised attacker "
             "ensemble (negative entropy, restarts)"),
):
    ANONYMIZERS.add(_method, AnonymizerSpec(
        _method, _desc, lambda ctx, m=_method: _build(m, ctx), "learned",
        params={"recipe": f"baselines/{_method}.json", "paper": PAPERS[_method],
                "version": VERSION},
        training_data=training_data(_method),
    ))
