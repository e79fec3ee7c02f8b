"""SPAct and VITA as baselines: registered, trained on first use and cached, and exported.

`baseline:spact` and `baseline:vita` train for the requested preset (recipes and loops in
`pabench.training.anonymizer`, the network in `pabench.anonymizers.learned`) on clips rendered
from a seed namespace no benchmark split uses, with known actions only (and, for VITA, known
attributes only), and cache the weights under `BuildContext.cache_dir` keyed by preset,
`VERSION` and a hash of the recipe. `train_and_export` writes one as a submission file with
its sidecar (`pabench baselines train`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from pabench.anonymizers import ANONYMIZERS, AnonymizerSpec, BuildContext
from pabench.anonymizers.cache import load_or_train as cached
from pabench.anonymizers.cache import models_dir
from pabench.anonymizers.learned import TRAIN_DATASET, AnonymizerUNet
from pabench.data.synth import KNOWN_ACTIONS, KNOWN_ATTRIBUTES, get_preset, resolve_preset
from pabench.errors import PabenchError
from pabench.runtime import (
    Progress,
    atomic_write_text,
    check_device,
    check_writable,
    init_distributed,
    is_rank0,
)
from pabench.submission import SubmissionMeta, TrainingData, check_format, export_submission
from pabench.training.anonymizer import (
    Log,
    SPActRecipe,
    TrainResult,
    VitaRecipe,
    default_recipe,
    load_recipe,
    train_anonymizer,
)

VERSION = "v1"  # bump when the architecture, the training data or the training code changes
DECLARED_DATASET = f"pa-synth-{TRAIN_DATASET}"
PAPERS = {
    "spact": "https://arxiv.org/abs/2203.15205",
    "vita": "https://arxiv.org/abs/1906.05675",
}


def training_data(method: str) -> TrainingData:
    """What a learned baseline sees in training: known actions always; VITA's supervised
    attackers also see the known attributes, SPAct's self-supervised branch no labels."""
    attributes = list(KNOWN_ATTRIBUTES) if method == "vita" else []
    recipe = default_recipe(method)
    attackers = (list(recipe.budget_models) if isinstance(recipe, VitaRecipe)
                 else [recipe.ssl_model])
    return TrainingData(datasets=[DECLARED_DATASET], action_classes=list(KNOWN_ACTIONS),
                        attributes=attributes, attackers=attackers)


def recipe_digest(recipe: SPActRecipe | VitaRecipe) -> str:
    return hashlib.sha256(recipe.model_dump_json().encode()).hexdigest()[:12]


def cache_path(method: str, preset: str, recipe: SPActRecipe | VitaRecipe,
               cache_dir: Path | None = None) -> Path:
    return models_dir(cache_dir) / f"{method}-{preset}-{VERSION}-{recipe_digest(recipe)}.pt"


def load_or_train(method: str, preset: str, *, recipe: SPActRecipe | VitaRecipe | None = None,
                  cache_dir: Path | None = None, device: str = "cpu",
                  progress: Progress | None = None, log: Log | None = None) -> TrainResult:
    """The trained anonymizer for `method` on `preset`, from the cache or trained now (the
    default recipe unless one is given). Under torchrun every rank trains its share (DDP) and
    rank 0 writes the cache."""
    get_preset(preset)
    spec = recipe if recipe is not None else default_recipe(method)

    def restore(payload: Any) -> TrainResult:
        net = AnonymizerUNet(spec.width)
        net.load_state_dict(payload["weights"])
        return TrainResult(net.eval(), payload["losses"], cached=True)

    return cached(
        cache_path(method, preset, spec, cache_dir), restore=restore,
        train=lambda: train_anonymizer(spec, preset, device=device, progress=progress, log=log),
        state=lambda result: {"weights": result.net.state_dict(), "losses": result.losses},
        what=f"baseline '{method}' for pa-synth {preset}, minutes on a CPU",
    )


@dataclass(frozen=True)
class TrainedExport:
    """What `train_and_export` wrote, for the caller to report."""

    name: str  # the submission name in the sidecar
    preset: str
    fmt: str
    path: Path
    sidecar: Path
    cache: Path
    result: TrainResult  # `cached` tells whether it was trained now


def train_and_export(method: str, out: Path, *, preset: str = "auto", device: str = "cpu",
                     recipe: Path | None = None, fmt: str = "torch.export",
                     progress: Progress | None = None,
                     log: Log | None = None) -> TrainedExport | None:
    """Train `method` on pa-synth (or reuse its cache) and write it as a submission file with
    a sidecar declaring its training data. The sidecar's name is METHOD-RECIPEHASH: a file may
    not take a baseline's own name. Every argument is checked before training. Under torchrun
    all ranks train; rank 0 reports (`progress`, `log`), writes and returns, the others
    return None."""
    spec = load_recipe(recipe, method) if recipe is not None else default_recipe(method)
    preset = resolve_preset(preset, check_device(device))
    fmt = check_format(fmt)
    out = Path(out)
    check_writable(out.parent)  # fail before minutes of training, not after
    device = init_distributed(device)
    rank0 = is_rank0()
    result = load_or_train(method, preset, recipe=spec, device=device,
                           progress=progress if rank0 else None, log=log if rank0 else None)
    if not rank0:
        return None
    p = get_preset(preset)
    written = export_submission(result.net, out, frames=p.frames, size=p.size, fmt=fmt)
    name = f"{method}-{recipe_digest(spec)}"
    meta = SubmissionMeta(name=name, paper_url=PAPERS[method], training_data=training_data(method))
    sidecar = atomic_write_text(written.with_suffix(".json"),
                                meta.model_dump_json(indent=2, exclude_none=True) + "\n")
    return TrainedExport(name, preset, fmt, written, sidecar, cache_path(method, preset, spec),
                         result)


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
