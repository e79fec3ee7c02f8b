"""The learned baselines (SPAct, penalty-driven SPAct, VITA and its GRL and K-Beam solvers,
MPPAR): registered in `pabench.anonymizers`' registry, trained on first use and cached, and
exported.

`baseline:NAME` trains for the requested preset (recipes and loops in
`pabench.training.methods`, the network in `pabench.anonymizers.learned`) on clips rendered
from a seed namespace no benchmark split uses, with known actions only (and, for the VITA
family, known attributes only), against architectures no protocol scores with, and caches the
weights under `BuildContext.cache_dir` keyed by the training data (preset, or the real
datasets' fingerprints), `VERSION` (the code), a hash of the recipe and where it trains.
`train_and_export` (`pabench train-baseline`) trains on pa-synth or on two built real datasets
and writes the result as a submission file with its sidecar, the curves of its training beside
it, and checkpoints it can resume from.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from torch import nn

from pabench.anonymizers import ANONYMIZERS, AnonymizerSpec, BuildContext
from pabench.anonymizers.cache import load_or_train as cached
from pabench.anonymizers.cache import models_dir
from pabench.anonymizers.learned import AnonymizerUNet
from pabench.data.synth import resolve_preset
from pabench.errors import PabenchError
from pabench.io import Progress, atomic_write_text, check_writable, digest, pabench_home
from pabench.protocols import get_protocol
from pabench.runtime import check_device, hardware_info, init_distributed, is_rank0, numerics
from pabench.submission import SubmissionMeta, TrainingData, check_format, export_submission
from pabench.training.curves import Curves
from pabench.training.held_out import HeldOutAttack
from pabench.training.held_out import held_out_attack as measure_held_out
from pabench.training.methods import (
    AnonymizerAmp,
    AnyRecipe,
    Log,
    TrainResult,
    VitaRecipe,
    anonymizer_autocast,
    default_recipe,
    load_recipe,
    train_anonymizer,
)
from pabench.training.pools import TrainingSource, real_source, synth_source

VERSION = "v2"  # bump when the architecture, the training data or the training code changes
REAL_SETTING = "ucf101-vispr1"  # the real protocol whose clip shape real training uses
PAPERS = {
    "spact": "https://arxiv.org/abs/2203.15205",
    "vita": "https://arxiv.org/abs/1906.05675",
    "vita-grl": "https://arxiv.org/abs/1906.05675",
    "vita-kbeam": "https://arxiv.org/abs/1906.05675",
}


def training_data(method: str, recipe: AnyRecipe | None = None,
                  source: TrainingSource | None = None) -> TrainingData:
    """What a learned baseline sees in training (pa-synth tiny unless `source` says): the
    source's actions always; the VITA family's supervised attackers also see its attributes,
    SPAct's self-supervised branch no labels; and the architectures it was trained against."""
    spec = recipe if recipe is not None else default_recipe(method)
    source = source or synth_source("tiny")
    attributes = list(source.attribute_names) if isinstance(spec, VitaRecipe) else []
    return TrainingData(datasets=list(source.datasets),
                        action_classes=list(source.action_classes), attributes=attributes,
                        attackers=list(spec.attackers()))


def recipe_digest(recipe: AnyRecipe) -> str:
    return hashlib.sha256(recipe.model_dump_json().encode()).hexdigest()[:12]


def cache_path(method: str, data: str, recipe: AnyRecipe, cache_dir: Path | None = None,
               device: str = "cpu", amp: AnonymizerAmp = "auto") -> Path:
    """The cache file of `method` trained on `data` (a preset, or a real source's key) on
    `device`: the same recipe trained with another thread count gave other weights (VITA,
    seed 0: digest 488a2f8e33fc on 2 threads, 724890b52ec0 on 1), so where it trains is in
    the key, as for the evaluation's fits, and so is an autocast dtype (a float32 training
    keeps the key it had before f_A trained under autocast, and its cache)."""
    dtype = anonymizer_autocast(amp, device)
    where = digest(*numerics(device), *([str(dtype)] if dtype is not None else []))[:8]
    return models_dir(cache_dir) / f"{method}-{data}-{VERSION}-{recipe_digest(recipe)}-{where}.pt"


def load_or_train(method: str, source: TrainingSource | str, *,
                  recipe: AnyRecipe | None = None,
                  cache_dir: Path | None = None, device: str = "cpu",
                  progress: Progress | None = None, log: Log | None = None,
                  curves: Curves | None = None, eval_every: int = 25,
                  resume: bool = False, amp: AnonymizerAmp = "auto") -> TrainResult:
    """The trained anonymizer for `method` on `source` (a pa-synth preset name, or a
    `TrainingSource`), from the cache or trained now (the default recipe unless one is given).
    Under torchrun every rank trains its share (DDP) and rank 0 writes the cache. Training
    checkpoints next to the cache file (`.ckpt`, removed once the cache is written); `resume`
    continues from it. Without `curves`, rank 0 still measures them (next to the cache file,
    and in it), so that a later export of a model an evaluation trained has its curves. `amp`:
    see `anonymizer_autocast`; the payload's `trained_on` names a dtype other than float32."""
    source = synth_source(source) if isinstance(source, str) else source
    spec = recipe if recipe is not None else default_recipe(method)
    path = cache_path(method, source.key, spec, cache_dir, device, amp)
    checkpoint = path.with_suffix(".ckpt")
    if curves is None and is_rank0():  # e.g. `pabench evaluate baseline:NAME`: curves kept in
        # the cache for a later `train-baseline` export; they do not move the weights
        curves = Curves(path.with_suffix(".curves.csv"), path.with_suffix(".curves.png"))

    def restore(payload: Any) -> TrainResult:
        net = AnonymizerUNet(spec.width)
        net.load_state_dict(payload["weights"])
        return TrainResult(net.eval(), payload["losses"], cached=True,
                           curves=payload.get("curves", []), trained_on=payload.get("trained_on"),
                           selection=payload.get("selection", []))

    def train() -> TrainResult:
        result = train_anonymizer(spec, source, device=device, progress=progress, log=log,
                                  curves=curves, eval_every=eval_every, checkpoint=checkpoint,
                                  resume=resume, amp=amp)
        dtype = anonymizer_autocast(amp, device)
        autocast = {"autocast": str(dtype).removeprefix("torch.")} if dtype is not None else {}
        return dataclasses.replace(result, trained_on={**hardware_info(device), **autocast})

    result = cached(
        path, restore=restore, train=train,
        state=lambda result: {"weights": result.net.state_dict(), "losses": result.losses,
                              "curves": result.curves, "trained_on": result.trained_on,
                              "selection": result.selection},
        what=f"baseline '{method}' for {'real data' if source.real else 'pa-synth'} "
             f"{source.key}",
    )
    if is_rank0() and not result.cached:
        checkpoint.unlink(missing_ok=True)
    return result


@dataclass(frozen=True)
class TrainedExport:
    """What `train_and_export` wrote, for the caller to report."""

    name: str  # the submission name in the sidecar
    preset: str  # the pa-synth preset, or "real"
    fmt: str
    path: Path
    sidecar: Path
    curves: tuple[Path, Path] | None  # CSV log and PNG plot; None: a cache made without them
    cache: Path
    result: TrainResult  # `cached` tells whether it was trained now
    attack: tuple[HeldOutAttack, Path] | None = None  # with `held_out_attack`: its result file


def default_out(method: str, data: str, recipe: AnyRecipe) -> Path:
    """Where `pabench train-baseline` writes unless told: the pabench home, one file per
    method, training data (preset or real source key) and recipe."""
    return pabench_home() / "baselines" / f"{method}-{data}-{recipe_digest(recipe)}.pt2"


def train_and_export(method: str, out: Path | None = None, *, preset: str = "auto",
                     data_dir: Path | None = None, action_data: str = "ucf101",
                     privacy_data: str = "vispr1", device: str = "cpu",
                     recipe: Path | None = None, seed: int | None = None,
                     fmt: str = "torch.export",
                     progress: Progress | None = None, log: Log | None = None,
                     echo: Callable[[str], None] | None = None, eval_every: int = 25,
                     resume: bool = False, held_out_attack: bool = False
                     ) -> TrainedExport | None:
    """Train `method` on pa-synth, or with `data_dir` on the built real datasets
    `action_data` and `privacy_data` at the real protocols' clip shape (or reuse its cache),
    and write it as a submission file with a sidecar declaring its training data and recipe
    (seeds included), and its training curves as OUT.curves.csv and OUT.curves.png (`echo`
    gets each curve row as a line). The sidecar's name is METHOD-RECIPEHASH: a file may not
    take a baseline's own name. With `held_out_attack` (pa-synth), a fresh attacker then
    measures the export's held-out privacy, written as OUT.held-out-attack.json (see
    `pabench.training.held_out`). `seed` replaces the recipe's seed. Every argument is
    checked before training. Under torchrun all ranks train; rank 0 reports, writes and
    returns, the others return None."""
    real = data_dir is not None
    if held_out_attack and real:
        raise PabenchError("--held-out-attack renders pa-synth's held-out clips; it does not "
                           "measure a --benchmark real training")
    spec = (load_recipe(recipe, method, real) if recipe is not None
            else default_recipe(method, real))
    if seed is not None:
        spec = spec.model_copy(update={"seed": seed})
    fmt = check_format(fmt)
    if data_dir is None:  # pa-synth
        source = synth_source(resolve_preset(preset, check_device(device)))
    else:
        check_device(device)
        clip = get_protocol(REAL_SETTING).clip
        assert clip.frames is not None and clip.size is not None
        source = real_source(data_dir, action_data, privacy_data, clip.frames, clip.size)
    if eval_every < 1:
        raise PabenchError(f"--eval-every must be at least 1, not {eval_every}")
    out = Path(out) if out is not None else default_out(method, source.key, spec)
    out.parent.mkdir(parents=True, exist_ok=True)
    check_writable(out.parent)  # fail before minutes of training, not after
    curve_files = (out.with_suffix(".curves.csv"), out.with_suffix(".curves.png"))
    device = init_distributed(device)
    rank0 = is_rank0()
    curves = Curves(*curve_files, echo=echo) if rank0 else None
    result = load_or_train(method, source, recipe=spec, device=device,
                           progress=progress if rank0 else None, log=log if rank0 else None,
                           curves=curves, eval_every=eval_every, resume=resume)
    # on every rank: under torchrun the attacker trains with DDP like any other fit
    measured = measure_held_out(copy.deepcopy(result.net).to(device).eval(), source.preset,
                                seed=spec.seed, device=device, generator=source.generator,
                                progress=progress if rank0 else None) if held_out_attack else None
    if curves is None:
        return None
    if result.cached and result.curves:  # the curves of the run that made the cache
        curves.restore(result.curves)
        curves.write()
    elif result.cached:  # cached before every training kept its curves: write no empty log
        curve_files = None
    written = export_submission(result.net, out, frames=source.frames, size=source.size,
                                fmt=fmt)
    name = f"{method}-{recipe_digest(spec)}"
    meta = SubmissionMeta(name=name, paper_url=PAPERS.get(method),
                          training_data=training_data(method, spec, source),
                          training_recipe=spec.model_dump(mode="json"),
                          trained_on=result.trained_on)
    sidecar = atomic_write_text(written.with_suffix(".json"),
                                meta.model_dump_json(indent=2, exclude_none=True) + "\n")
    attack = None
    if measured is not None:
        attack = measured, atomic_write_text(
            written.with_suffix(".held-out-attack.json"),
            json.dumps({"name": name, **asdict(measured)}, indent=2) + "\n")
    return TrainedExport(name, source.preset, fmt, written, sidecar, curve_files,
                         cache_path(method, source.key, spec, device=device), result, attack)


def _training_seed(method: str, replica: int) -> int:
    return default_recipe(method).seed + replica


def _build(method: str, ctx: BuildContext) -> nn.Module:
    if ctx.benchmark != "pa-synth":
        raise PabenchError(f"baseline:{method} is trained on pa-synth; for real data run "
                           f"`pabench train-baseline {method} --benchmark real` and evaluate "
                           "the file it writes")
    recipe = default_recipe(method)
    recipe = recipe.model_copy(update={"seed": _training_seed(method, ctx.replica)})
    result = load_or_train(method, synth_source(ctx.preset, ctx.data_version), recipe=recipe,
                           cache_dir=ctx.cache_dir, device=ctx.device)
    result.net.trained_on = result.trained_on
    # records name the recipe (its steps move a result as much as its seed does)
    result.net.training_recipe = recipe.model_dump(mode="json")
    return result.net.to(ctx.device).eval()


for _method, _desc in (
    ("spact", "SPAct (Dave et al., CVPR 2022): U-Net f_A trained against a self-supervised "
              "NT-Xent privacy branch, no privacy labels"),
    ("penalty", "Penalty-driven SPAct (Aslam & Nasrollahi, 2025): SPAct with a hinge penalty "
                "on f_A's RMS change of action clips beyond a bound B"),
    ("vita", "VITA (Wu et al., TPAMI): U-Net f_A trained against a supervised attacker "
             "ensemble (negative entropy, restarts)"),
    ("vita-grl", "VITA's GRL solver (Wu et al., TPAMI): f_A ascends the most successful "
                 "attacker's cross-entropy (ensemble, restarts)"),
    ("vita-kbeam", "VITA's K-Beam solver (Wu et al., TPAMI): f_A ascends the loss of the best "
                   "of K attacker beams, utility from the joint step (restarts)"),
    ("mppar", "MPPAR (Peng et al., NeurIPS 2023): f_A meta-learned over attribute- and "
              "attack-model-different virtual train/test splits"),
):
    ANONYMIZERS.add(_method, AnonymizerSpec(
        _method, _desc, lambda ctx, m=_method: _build(m, ctx), "learned",
        params={"recipe": f"baselines/{_method}.json", "version": VERSION,
                **({"paper": PAPERS[_method]} if _method in PAPERS else {})},
        training_data=training_data(_method),
        training_seed=lambda k, m=_method: _training_seed(m, k),
    ))
