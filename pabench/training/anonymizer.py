"""Training of the learned anonymizer baselines: SPAct and penalty-driven SPAct
(self-supervised), VITA with its three minimax solvers and MPPAR (supervised).

All start as the papers do: the U-Net f_A is pretrained to the identity by L1 reconstruction,
then the utility model f_T (action classes) and the privacy side f_B are trained on its output.
The minimax phase then alternates an f_A update against frozen f_T/f_B with updates of f_T/f_B
on the current f_A output:

* SPAct (Dave et al., CVPR 2022): f_B is a 2D CNN with a two-layer projection head trained with
  NT-Xent on two frames of one clip (positives) against the other clips' frames; f_A minimises
  L_T - omega * L_NT-Xent, so frames of one video stop agreeing. No privacy labels.
* penalty (penalty-driven SPAct): SPAct plus lambda * max(0, RMS(X - f_A(X)) - B) per clip in
  f_A's loss, so f_A may not move an action clip further than B from the input.
* VITA (Wu et al., TPAMI), with model restarting and an ensemble of M attackers: f_A's privacy
  term is taken against the strongest attacker; every attacker takes a supervised step per
  iteration and all are re-initialised every `restart_every` iterations. The three solvers of
  the paper differ in that term: "entropy" (Ours-Entropy: L_T + gamma * max_i -H(f_B^i)),
  "grl" (L_T - gamma * min_i L_B^i, the gradient-reversal update) and "kbeam" (Ours-K-Beam:
  -gamma * L_B^j for the beam j of lowest loss, the utility coming from the joint step).
* MPPAR (Peng et al., NeurIPS 2023): the same attacker set, no restarts; f_A is updated only by
  a meta step over support/query sets that differ in attributes (labels masked) or in attack
  models, split 60/40 each epoch (its supplement's Algorithm 1 and set construction).

Where the papers loop "until accuracy reaches a threshold", each iteration here takes a fixed
number of updates, so a recipe has a known cost. The clips (`pabench.training.pools`) are
rendered from a pa-synth seed namespace of their own with known actions only, so no benchmark
split is ever seen, or come from two built real datasets (action and privacy, the papers'
UCF101 + VISPR1 setting); the held-out clips of the curves come from the same namespace.

A run can be watched and resumed: every `eval_every` minimax iterations a `Curves` row gets the
mean losses and held-out utility/privacy; a checkpoint (all weights, optimizer states, random
generator states and the curves) is written after each pretraining stage and after every epoch
(ceil(clips / batch) minimax iterations), and `resume=True` continues from it to the weights an
uninterrupted run reaches.

Under torchrun every trained model is wrapped in DistributedDataParallel and each rank takes a
slice of every batch (the batch indices come from one seeded generator, identical on all ranks);
stopping decisions use all-reduced losses, so all ranks run the same number of steps.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)
from torch import nn

from pabench.anonymizers.learned import GROUPS, AnonymizerUNet
from pabench.errors import PabenchError, unknown_name
from pabench.io import Progress, atomic_write, read_json, validation_error
from pabench.metrics import cmap_fixed
from pabench.models import MODELS, build_model
from pabench.runtime import barrier, is_distributed, is_rank0, wrap_ddp
from pabench.training import autocast_dtype
from pabench.training.attackers import TRAINING_ONLY
from pabench.training.curves import Curves
from pabench.training.held_out import select_snapshot
from pabench.training.pools import Batches, ClipPool, TrainingSource, as_tensor, synth_source

Log = Callable[[str, dict[str, float]], None]
METHODS = ("spact", "penalty", "vita", "vita-grl", "vita-kbeam", "mppar")
TRAINING_ATTACKERS = TRAINING_ONLY  # disjoint from every protocol's attackers


class _Recipe(BaseModel):
    """Settings shared by every method. Defaults are the leaderboard settings for pa-synth
    (`baselines/*.json` holds the same values); sized so that a tiny-preset run takes about
    five minutes on one CPU thread."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    clips: int = Field(1024, ge=8, description="pa-synth: training clips rendered (known "
                                               "actions); real data trains on its train split")
    batch: int = Field(16, ge=2, description="clips per step, summed over DDP ranks")
    width: int = Field(16, ge=GROUPS, multiple_of=GROUPS, description="U-Net width of f_A")
    identity_steps: int = Field(600, ge=1, description="max L1 reconstruction steps for f_A")
    identity_batch: int = Field(4, ge=1, description="clips per reconstruction step: the loss "
                                                     "is per pixel, so few clips suffice")
    identity_l1: float = Field(0.04, gt=0, description="stop reconstruction once the mean "
                                                        "absolute error per value is below")
    identity_lr: float = 3e-3
    target: str = "tiny3d"
    target_steps: int = Field(150, ge=0, description="f_T pretraining steps on f_A's output")
    target_lr: float = 2e-3
    steps: int = Field(300, ge=0, description="minimax iterations")
    anonymizer_lr: float = 1e-3
    select_every: int | None = Field(
        None, ge=1, description="pa-synth: keep f_A every N minimax iterations and at the end, "
        "and export the one fresh held-out attackers find most private among those keeping "
        "action (`pabench.training.held_out.select_snapshot`); none: the last")

    @model_serializer(mode="wrap")
    def _without_unset_selection(self, handler: SerializerFunctionWrapHandler) -> dict:
        """A recipe without selection dumps as before the field existed, so its digest, its
        cache and the recipes its records name stay what they were."""
        data = handler(self)
        if self.select_every is None:
            data.pop("select_every", None)
        return data


class SPActRecipe(_Recipe):
    method: Literal["spact"] = "spact"
    ssl_model: str = Field(TRAINING_ATTACKERS[0],
                           description="2D backbone of the privacy branch f_B")
    ssl_hidden: int = Field(128, ge=1, description="backbone output = projection head input")
    ssl_dim: int = Field(128, ge=1, description="projection size the NT-Xent loss sees")
    ssl_steps: int = Field(150, ge=0, description="f_B pretraining steps on f_A's output")
    ssl_lr: float = 2e-3
    temperature: float = Field(0.1, gt=0)
    # 0.25, inside SPAct's (0, 1) range: chosen on held-out clips of the training namespace
    # (docs/baselines.md), where 1.0 fell below the held-out top-1 bar in two of three seeds
    omega: float = Field(0.25, gt=0, description="weight of -NT-Xent in f_A's loss")

    def attackers(self) -> tuple[str, ...]:
        """The privacy-side architectures f_A is trained against (declared in the sidecar)."""
        return (self.ssl_model,)


class PenaltyRecipe(SPActRecipe):
    method: Literal["penalty"] = "penalty"  # type: ignore[assignment]
    omega: float = Field(1.0, gt=0, description="weight of -NT-Xent in f_A's loss (1.0 kept "
                                                "over 0.25 on held-out clips, three seeds)")
    penalty_weight: float = Field(1.0, ge=0, description="lambda: weight of the penalty")
    penalty_bound: float = Field(0.3, gt=0, description="B: the RMS change of an action clip "
                                                        "beyond which f_A is penalised")


class VitaRecipe(_Recipe):
    method: Literal["vita"] = "vita"
    steps: int = Field(200, ge=0, description="minimax iterations (each costs about two "
                                              "SPAct iterations)")
    budget_models: tuple[str, ...] = Field(TRAINING_ATTACKERS, min_length=1,
                                           description="the attacker ensemble (frame models); "
                                                       "for K-Beam, one entry per beam")
    budget_frames: int = Field(4, ge=1, description="frames per clip an attacker averages")
    budget_clips: int = Field(256, ge=1, description="clips anonymized once per (re)start "
                                                     "for the attackers to train on")
    budget_steps: int = Field(500, ge=0, description="attacker training steps at the start "
                                                     "and after each restart")
    budget_lr: float = 2e-3
    gamma: float = Field(2.0, gt=0, description="weight of the privacy term in f_A's loss")
    restart_every: int = Field(200, ge=1, description="re-initialise the attackers every N "
                               "minimax iterations (200, no restart in 200 steps, beat 100 in "
                               "every seed on held-out clips: docs/baselines.md)")
    # th_B: with one step per iteration the attackers sat at chance on f_A's current output;
    # 0.95 (the paper's multi-label value) won on held-out clips for vita and vita-kbeam, and as
    # MPPAR's T2 for mppar (docs/baselines.md)
    budget_threshold: float | None = Field(
        0.95, gt=0, le=1, description="th_B of VITA's algorithms: every iteration an attacker "
        "keeps stepping, on fresh privacy batches, while its element-wise accuracy on the "
        "batch is at most this; none: one step")
    budget_max_steps: int = Field(10, ge=1, description="cap on those steps per iteration "
                                                        "(with budget_threshold)")

    def attackers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.budget_models))


class VitaGRLRecipe(VitaRecipe):
    method: Literal["vita-grl"] = "vita-grl"  # type: ignore[assignment]
    steps: int = Field(600, ge=0, description="minimax iterations (600 beat 200 in every "
                                              "seed on held-out clips: docs/baselines.md)")
    gamma: float = Field(0.5, gt=0, description="weight of -L_B in f_A's loss (2.0 was not "
                         "more private at every seed on held-out clips: docs/baselines.md)")
    restart_every: int = Field(100, ge=1, description="re-initialise the attackers every N "
                               "minimax iterations (VITA's; 300 was not more private at every "
                               "seed on held-out clips: docs/baselines.md)")
    budget_threshold: float | None = Field(None, gt=0, le=1, description="th_B (none: one "
                                           "attacker step per iteration; 0.95 was not more "
                                           "private at every seed on held-out clips: "
                                           "docs/baselines.md)")


class VitaKBeamRecipe(VitaRecipe):
    method: Literal["vita-kbeam"] = "vita-kbeam"  # type: ignore[assignment]
    steps: int = Field(600, ge=0, description="minimax iterations (600 beat 200 in every "
                                              "seed on held-out clips: docs/baselines.md)")
    budget_models: tuple[str, ...] = Field(TRAINING_ATTACKERS * 2, min_length=1,
                                           description="one frame model per beam (K entries)")
    gamma: float = Field(0.5, gt=0, description="weight of L_B in f_A's ascent step")
    restart_every: int = Field(300, ge=1, description="re-initialise the beams every N "
                               "iterations (300 beat 100 in every seed on held-out clips: "
                               "docs/baselines.md)")
    ascent_steps: int = Field(1, ge=1, description="d_iter of the paper's Algorithm 2: f_A "
                              "ascent steps per iteration against the beam picked at its "
                              "first, each on a fresh privacy batch")


class MPPARRecipe(VitaRecipe):
    """MPPAR (Peng et al., NeurIPS 2023): the VITA-style attacker set f_train^P, and f_A
    updated only by the meta step over attribute- and model-different support/query sets."""

    method: Literal["mppar"] = "mppar"  # type: ignore[assignment]
    steps: int = Field(900, ge=0, description="minimax iterations (attribute and model "
                                              "splits alternate; 600 beat 200, then with T2 "
                                              "900 beat 600, in every seed on held-out clips: "
                                              "docs/baselines.md)")
    budget_models: tuple[str, ...] = Field(TRAINING_ATTACKERS, min_length=2,
                                           description="f_train^P, split 60/40 each epoch")
    gamma: float = Field(0.5, gt=0, description="weight of -L_B in the loss L")
    anonymizer_lr: float = Field(1e-3, gt=0, description="beta: Adam learning rate of the "
                                 "meta (outer) update; the paper's 1e-4, kept for real data "
                                 "and its 100 epochs, gained no held-out privacy in pa-synth's "
                                 "200 steps")
    inner_lr: float = Field(5e-4, gt=0, description="alpha: the virtual training step")
    support_share: float = Field(0.6, gt=0, lt=1, description="share of the attributes, "
                                 "mixed clips and attack models on the support side")
    first_order: bool = Field(False, description="drop the second-order term of the meta "
                                                 "gradient (cheaper)")
    restart_every: int = Field(1000, ge=1, description="MPPAR does not restart: beyond steps")
    budget_threshold: float | None = Field(0.95, gt=0, le=1, description="T2 of MPPAR's "
                                           "Algorithm 1: every attack model keeps stepping "
                                           "while its accuracy is at most this (none: one "
                                           "step; 0.95 was more private at every seed on "
                                           "held-out clips: docs/baselines.md)")


AnyRecipe = (SPActRecipe | PenaltyRecipe | VitaRecipe | VitaGRLRecipe | VitaKBeamRecipe
             | MPPARRecipe)
Recipe = Annotated[AnyRecipe, Field(discriminator="method")]
RECIPES: dict[str, type[_Recipe]] = {
    "spact": SPActRecipe, "penalty": PenaltyRecipe, "vita": VitaRecipe,
    "vita-grl": VitaGRLRecipe, "vita-kbeam": VitaKBeamRecipe, "mppar": MPPARRecipe,
}


def default_recipe(method: str, real: bool = False) -> AnyRecipe:
    """The leaderboard recipe for pa-synth, or with `real` the papers' settings for real data
    (`baselines/real/NAME.json` holds the same values)."""
    if method not in RECIPES:
        raise unknown_name("learned baseline", method, RECIPES)
    return RECIPES[method](**(_real_settings(method) if real else {}))  # type: ignore[return-value]


_REAL_EPOCH = 537  # steps per epoch: UCF101 split-1 train (9,537 videos) less a tenth, batch 16


def _real_settings(method: str) -> dict:
    """UCF101 + VISPR1 training as in SPAct's supplement (C.2-C.4): R3D-18 f_T, ResNet-50
    NT-Xent f_B, Adam at 1e-3, f_A pretrained 100 epochs, f_T 150, f_B 400, minimax 100
    epochs; VITA's gamma 0.5 and th_B 0.99 (its UCF101 setting, for all three solvers);
    MPPAR's alpha 5e-4, beta 1e-4 and T2 95% (its supplement's attacker threshold, as th_B).
    Ours: the U-Net width, and the VITA family's attacker ensemble (ResNet-34 +
    MobileNet-V3-Large, disjoint from every real protocol's attackers), retrained from scratch
    every 10 epochs."""
    epoch = _REAL_EPOCH
    common = dict(batch=16, width=32, identity_steps=100 * epoch, identity_batch=16,
                  identity_lr=1e-3, target="r3d_18", target_steps=150 * epoch, target_lr=1e-3,
                  steps=100 * epoch, anonymizer_lr=1e-3)
    if method in ("spact", "penalty"):
        return common | dict(ssl_model="resnet50", ssl_hidden=2048, ssl_dim=128,
                             ssl_steps=400 * epoch, ssl_lr=1e-3, temperature=0.1)
    ensemble = ["resnet34", "mobilenet_v3_large"]
    vita = common | dict(budget_models=ensemble * (2 if method == "vita-kbeam" else 1),
                         budget_frames=4, budget_clips=1024, budget_steps=4 * epoch,
                         budget_lr=1e-3, restart_every=10 * epoch)
    if method == "mppar":
        return vita | dict(restart_every=100 * epoch + 1, anonymizer_lr=1e-4, inner_lr=5e-4,
                           budget_threshold=0.95)
    # VITA's UCF101 + VISPR experiment (its Sec. 4.2.2): gamma 0.5 and th_B 99% for each solver
    return vita | dict(gamma=0.5, budget_threshold=0.99)


def load_recipe(path: Path, method: str, real: bool = False) -> AnyRecipe:
    """Read a recipe file for `method`: its values over the defaults of pa-synth (or with
    `real` of real data). Any problem is one line naming the file."""
    if method not in RECIPES:
        raise unknown_name("learned baseline", method, RECIPES)
    data = read_json(path, f"recipe {path}")
    if isinstance(data, dict):
        data = {"method": method, **(_real_settings(method) if real else {}), **data}
    try:
        recipe = TypeAdapter(Recipe).validate_python(data)
    except ValidationError as e:
        raise validation_error(f"recipe {path}", e, skip=1) from None
    if recipe.method != method:
        raise PabenchError(f"recipe {path}: is a '{recipe.method}' recipe, not '{method}'")
    if real and recipe.select_every is not None:
        raise PabenchError(f"recipe {path}: select_every probes pa-synth's held-out clips; a "
                           "real-data training cannot select (remove it)")
    _check_models(path, recipe)
    return recipe


def _check_models(source: Path | str, recipe: AnyRecipe) -> None:
    """Model names must exist with the right kind: a typo fails before minutes of training."""
    wanted = [("target", recipe.target, "video")]
    if isinstance(recipe, SPActRecipe):
        wanted.append(("ssl_model", recipe.ssl_model, "frame"))
    else:
        wanted += [("budget_models", m, "frame") for m in recipe.budget_models]
    for key, name, kind in wanted:
        if name not in MODELS:
            raise PabenchError(f"recipe {source}: {key}: {unknown_name('model', name, MODELS)}")
        if MODELS.get(name).kind != kind:
            raise PabenchError(f"recipe {source}: {key}: model '{name}' is a "
                               f"{MODELS.get(name).kind} model, expected a {kind} model")


@dataclass
class TrainResult:
    """The trained f_A and, per stage, its losses at the start and the end of the stage."""

    net: AnonymizerUNet
    losses: dict[str, dict[str, float]]
    cached: bool = False
    curves: list[dict[str, float]] = field(default_factory=list)  # `Curves` rows, if measured
    trained_on: dict[str, str] | None = None  # `hardware_info` of the training (None: cached
    # before caches kept it)
    selection: list[dict[str, float]] = field(default_factory=list)  # `select_snapshot` rows


def _take_frames(video: torch.Tensor, picks: torch.Tensor) -> torch.Tensor:
    """video [n, 3, T, H, W], picks [n, k] -> frames [n * k, 3, H, W] (clip-major)."""
    n, c, _, h, w = video.shape
    index = picks.view(n, 1, -1, 1, 1).expand(n, c, picks.shape[1], h, w)
    return video.gather(2, index).transpose(1, 2).reshape(-1, c, h, w)


# ---------------------------------------------------------------- models and DDP


def _mean_across_ranks(value: torch.Tensor) -> float:
    value = value.detach().clone()
    if is_distributed():
        dist.all_reduce(value)
        value /= dist.get_world_size()
    return float(value)


def _sync_buffers(*models: nn.Module) -> None:
    """BatchNorm statistics drift per rank: take rank 0's everywhere."""
    if is_distributed():
        for model in models:
            for buf in model.buffers():
                dist.broadcast(buf, 0)


@contextmanager
def _frozen(*models: nn.Module) -> Iterator[None]:
    """Use models as fixed functions in f_A's step: no gradients into their weights (so their
    DDP reducers are never triggered by another model's update), but training-mode batch
    statistics. With frozen running statistics f_A wins by merely shrinking its output, which
    fresh attackers normalise away; with batch statistics it has to change the content."""
    for m in models:
        m.requires_grad_(False)
    try:
        yield
    finally:
        for m in models:
            m.requires_grad_(True)


class SSLModel(nn.Module):
    """SPAct's privacy branch: a 2D backbone whose classifier outputs `hidden` features, then
    ReLU and a linear projection (together the paper's two-layer head g)."""

    def __init__(self, backbone: str, hidden: int, dim: int, size: int) -> None:
        super().__init__()
        self.backbone = build_model(backbone, hidden, size)
        self.project = nn.Sequential(nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.project(self.backbone(x)), dim=1)


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """NT-Xent over 2n unit vectors: each view's positive is the other view of its clip, the
    other 2n - 2 views are negatives."""
    n = z1.shape[0]
    z = torch.cat([z1, z2])
    sim = z @ z.T / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return F.cross_entropy(sim, target)


def binary_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of independent Bernoulli predictions: maximal (log 2) when the
    attacker is maximally unsure."""
    p = torch.sigmoid(logits)
    return (F.softplus(logits) - p * logits).mean()


class _Stage:
    """Progress and start/end loss means for one training stage."""

    def __init__(self, name: str, total: int, progress: Progress | None) -> None:
        self.name, self.total, self.progress = name, total, progress
        self.history: dict[str, list[float]] = {}
        self.done = 0

    def step(self, **losses: torch.Tensor) -> None:
        for k, v in losses.items():
            self.history.setdefault(k, []).append(float(v.detach()))
        self.done += 1
        if self.progress and (self.done % 5 == 0 or self.done == self.total):
            self.progress(self.name, self.done, self.total)

    def state(self) -> dict:
        return {"history": self.history, "done": self.done}

    def load(self, state: dict) -> None:
        self.history = {k: list(v) for k, v in state["history"].items()}
        self.done = int(state["done"])

    def recent(self, n: int) -> dict[str, float]:
        """Mean of each loss over the last `n` steps: a curve row's training part."""
        return {k: float(np.mean(v[-n:])) for k, v in self.history.items() if v}

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"steps": float(self.done)}
        for k, vals in self.history.items():
            m = max(1, len(vals) // 10)
            out[f"{k}_start"] = float(np.mean(vals[:m]))
            out[f"{k}_end"] = float(np.mean(vals[-m:]))
        return out


# ---------------------------------------------------------------- training


@dataclass
class _Nets:
    """f_A and f_T, each bare (used frozen or without gradients) and as trained (DDP-wrapped
    under torchrun), with the optimizers of the minimax phase."""

    fa: AnonymizerUNet
    fa_ddp: nn.Module
    ft: nn.Module
    ft_ddp: nn.Module
    opt_a: torch.optim.Optimizer
    opt_t: torch.optim.Optimizer


def _update(opt: torch.optim.Optimizer | list[torch.optim.Optimizer],
            loss: torch.Tensor) -> None:
    opts = opt if isinstance(opt, list) else [opt]
    for o in opts:
        o.zero_grad(set_to_none=True)
    loss.backward()
    for o in opts:
        o.step()


def pretrain_identity(fa: nn.Module, batches: Batches, recipe: _Recipe,
                      progress: Progress | None = None) -> _Stage:
    """L1 reconstruction until the all-rank mean error is below `identity_l1` (SPAct's th_A0)
    or `identity_steps` have run."""
    stage = _Stage("identity", recipe.identity_steps, progress)
    opt = torch.optim.Adam(fa.parameters(), lr=recipe.identity_lr)
    fa.train()
    for _ in range(recipe.identity_steps):
        x, _ = batches.action(recipe.identity_batch)
        loss = F.l1_loss(fa(x), x)
        _update(opt, loss)
        stage.step(l1=loss)
        if _mean_across_ranks(loss) < recipe.identity_l1:
            break
    if progress:
        progress(stage.name, stage.total, stage.total)
    return stage


def _pretrain_target(nets: _Nets, batches: Batches, recipe: _Recipe,
                     progress: Progress | None) -> _Stage:
    """f_T learns the actions on the identity-initialised f_A's output (SPAct Eq. 7)."""
    stage = _Stage("target", recipe.target_steps, progress)
    nets.ft.train()
    for _ in range(recipe.target_steps):
        x, y = batches.action()
        with torch.no_grad():
            a = nets.fa(x)
        logits = nets.ft_ddp(a)
        loss = F.cross_entropy(logits, y)
        _update(nets.opt_t, loss)
        stage.step(ce=loss, acc=(logits.argmax(1) == y).float().mean())
    _sync_buffers(nets.ft)
    return stage


@contextmanager
def _evaluating(*models: nn.Module, batch_stats: tuple[nn.Module, ...] = ()) -> Iterator[None]:
    """Held-out measurement without gradients, so that neither weights, BatchNorm statistics
    nor random generators move and a run's weights do not depend on its curves. `models` run
    in eval mode; `batch_stats` models (the privacy side, none with dropout) in training mode,
    as f_A's step sees them (their running statistics lag far behind early in training), with
    their buffers restored afterwards."""
    modes = [m.training for m in (*models, *batch_stats)]
    saved = [[b.clone() for b in m.buffers()] for m in batch_stats]
    for m in models:
        m.eval()
    for m in batch_stats:
        m.train()
    try:
        with torch.no_grad():
            yield
    finally:
        for m, mode in zip((*models, *batch_stats), modes, strict=True):
            m.train(mode)
        for m, buffers in zip(batch_stats, saved, strict=True):
            for b, old in zip(m.buffers(), buffers, strict=True):
                b.copy_(old)


def _spread(t: int, k: int, n: int, device: str) -> torch.Tensor:
    """`k` evenly spaced frame indices for each of `n` clips: fixed held-out frames."""
    picks = torch.linspace(0, t - 1, k).round().long()
    return picks.expand(n, k).to(device)


def _anonymize_both(fa: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                    xp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """f_A's output on action clips `x` and privacy clips `xp` in one forward pass (a DDP
    module takes one per backward); once when they are the same clips."""
    if xp is x:
        a = fa(x)
        return a, a
    both = fa(torch.cat([x, xp]))
    return both[:len(x)], both[len(x):]


class _Privacy(ABC):
    """A method's privacy side: its models, their pretraining, and one minimax iteration (the
    f_A step against it, then the f_T and privacy-side steps)."""

    def __init__(self, nets: _Nets, batches: Batches, size: int, device: str,
                 progress: Progress | None) -> None:
        self.nets, self.batches, self.size, self.device = nets, batches, size, device
        self.progress = progress

    @abstractmethod
    def models(self) -> list[nn.Module]:
        """The privacy-side networks (for BatchNorm sync and held-out evaluation)."""

    @abstractmethod
    def pretrain(self) -> list[_Stage]:
        """Train the privacy side on the identity-initialised f_A's output."""

    @abstractmethod
    def iteration(self, it: int) -> dict[str, torch.Tensor]:
        """Minimax iteration `it`; returns its losses for the log."""

    @abstractmethod
    def term(self, a: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """f_A's privacy term against the privacy side as it stands, with fixed frames (call
        under `_evaluating` with `batch_stats=models()`): what the minimax phase drives
        down."""

    @abstractmethod
    def held_out(self, a: torch.Tensor, yb: torch.Tensor) -> dict[str, float]:
        """Held-out privacy measures of anonymized clips `a` (under `_evaluating`)."""

    @abstractmethod
    def state_dict(self) -> dict:
        """Everything a checkpoint needs to continue this side bit for bit."""

    @abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()`'s output."""

    def finished(self) -> list[_Stage]:
        """Stages to report beside the minimax phase (VITA's restarts)."""
        return []


class _SSL(_Privacy):
    """SPAct's self-supervised branch; with a `PenaltyRecipe`, the penalty-driven variant."""

    def __init__(self, recipe: SPActRecipe, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.r = recipe
        self.fb = SSLModel(recipe.ssl_model, recipe.ssl_hidden, recipe.ssl_dim,
                           self.size).to(self.device)
        self.fb_ddp = wrap_ddp(self.fb, self.device)
        self.opt_b = torch.optim.Adam(self.fb.parameters(), lr=recipe.ssl_lr)

    def models(self) -> list[nn.Module]:
        return [self.fb]

    def _loss(self, model: nn.Module, video: torch.Tensor,
              picks: torch.Tensor | None = None) -> torch.Tensor:
        n, t = video.shape[0], video.shape[2]
        if picks is None:
            picks = self.batches.frames_of(t, 2, distinct=True)  # SPAct's random temporal sampler
        z = model(_take_frames(video, picks)).view(n, 2, -1)
        return nt_xent(z[:, 0], z[:, 1], self.r.temperature)

    def pretrain(self) -> list[_Stage]:
        stage = _Stage("privacy", self.r.ssl_steps, self.progress)
        self.fb.train()
        for _ in range(self.r.ssl_steps):
            x, _ = self.batches.action()
            with torch.no_grad():
                a = self.nets.fa(x)
            loss = self._loss(self.fb_ddp, a)
            _update(self.opt_b, loss)
            stage.step(nt_xent=loss)
        _sync_buffers(self.fb)
        return [stage]

    def iteration(self, it: int) -> dict[str, torch.Tensor]:
        """One f_A step on L_T - omega * L_B (+ lambda * penalty) with f_T and f_B frozen; on
        the next batch one step of each of f_T (L_T) and f_B (L_B) with f_A frozen."""
        nets, r = self.nets, self.r
        x, y = self.batches.action()
        extra: dict[str, torch.Tensor] = {}
        with _frozen(nets.ft, self.fb):
            a = nets.fa_ddp(x)
            lt = F.cross_entropy(nets.ft(a), y)
            lb = self._loss(self.fb, a)
            loss = lt - r.omega * lb
            if isinstance(r, PenaltyRecipe):  # every training clip is action data here
                rms = (x - a).pow(2).flatten(1).mean(1).sqrt()
                penalty = F.relu(rms - r.penalty_bound).mean()
                loss = loss + r.penalty_weight * penalty
                extra = {"fa_rms": rms.mean(), "fa_penalty": penalty}
            _update(nets.opt_a, loss)
        x, y = self.batches.action()
        with torch.no_grad():
            a = nets.fa(x)
        logits = nets.ft_ddp(a)
        lt_t = F.cross_entropy(logits, y)
        _update(nets.opt_t, lt_t)
        lb_b = self._loss(self.fb_ddp, a)
        _update(self.opt_b, lb_b)
        return {"fa_utility": lt, "fa_nt_xent": lb, **extra, "ft_ce": lt_t, "fb_nt_xent": lb_b,
                "ft_acc": (logits.argmax(1) == y).float().mean()}

    def term(self, a: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return -self.r.omega * self._loss(self.fb, a, _spread(a.shape[2], 2, len(a), self.device))

    def held_out(self, a: torch.Tensor, yb: torch.Tensor) -> dict[str, float]:
        """NT-Xent of f_B (f_A pushes it up) and how often f_B matches a clip's two frames
        (% of clips whose other frame is the most similar among the batch's)."""
        picks = _spread(a.shape[2], 2, len(a), self.device)
        z = self.fb(_take_frames(a, picks)).view(len(a), 2, -1)
        match = (z[:, 0] @ z[:, 1].T).argmax(1) == torch.arange(len(a), device=a.device)
        return {"val_nt_xent": float(nt_xent(z[:, 0], z[:, 1], self.r.temperature)),
                "val_match": 100 * float(match.float().mean())}

    def state_dict(self) -> dict:
        return {"fb": self.fb.state_dict(), "opt_b": self.opt_b.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.fb.load_state_dict(state["fb"])
        self.opt_b.load_state_dict(state["opt_b"])


class _Vita(_Privacy):
    """VITA's supervised attacker ensemble with restarting, and its three solvers."""

    def __init__(self, recipe: VitaRecipe, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.r = recipe
        self.round = 0
        self.attackers: list[nn.Module] = []
        self.wrapped: list[nn.Module] = []
        self.opts: list[torch.optim.Optimizer] = []
        restarts = max(0, (recipe.steps - 1) // recipe.restart_every)
        self.restart = _Stage("restarts", restarts * recipe.budget_steps, self.progress)

    def models(self) -> list[nn.Module]:
        return self.attackers

    def _new(self, round_: int) -> None:
        """Fresh attackers for `round_`: the same weights on every rank and after a resume."""
        torch.manual_seed(self.r.seed + 1 + round_)
        n_attr = self.batches.privacy_pool.attributes.shape[1]
        self.round = round_
        self.attackers = [build_model(m, n_attr, self.size).to(self.device)
                          for m in self.r.budget_models]
        self.opts = [torch.optim.Adam(m.parameters(), lr=self.r.budget_lr)
                     for m in self.attackers]
        self.wrapped = [wrap_ddp(m, self.device) for m in self.attackers]

    def _logits(self, model: nn.Module, video: torch.Tensor,
                picks: torch.Tensor | None = None) -> torch.Tensor:
        """Frame logits averaged over `budget_frames` random frames of each clip (VITA)."""
        n, t = video.shape[0], video.shape[2]
        if picks is None:
            picks = self.batches.frames_of(t, self.r.budget_frames)
        return model(_take_frames(video, picks)).view(n, picks.shape[1], -1).mean(1)

    def _attacker_step(self, a: torch.Tensor, yb: torch.Tensor,
                       picks: torch.Tensor | None = None,
                       active: list[bool] | None = None,
                       ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One supervised step of every (`active`) attacker on anonymized clips; returns the
        mean BCE and each attacker's element-wise accuracy on the batch before its step."""
        bce, acc = [], []
        for i, (model, opt) in enumerate(zip(self.wrapped, self.opts, strict=True)):
            if active is not None and not active[i]:
                continue
            logits = self._logits(model, a, picks)
            loss = F.binary_cross_entropy_with_logits(logits, yb)
            _update(opt, loss)
            bce.append(loss.detach())
            acc.append(((logits.detach() > 0) == (yb > 0.5)).float().mean())
        return torch.stack(bce).mean(), acc

    def _attackers_learn(self) -> torch.Tensor:
        """The L_B min step: one supervised step of every attacker on f_A's output of a fresh
        privacy batch; with `budget_threshold` (th_B), VITA's "while Acc <= th_B", capped at
        `budget_max_steps`, each step on a fresh batch. Returns the first step's mean BCE."""
        r, active, first = self.r, [True] * len(self.attackers), None
        for _ in range(r.budget_max_steps if r.budget_threshold is not None else 1):
            x, yb = self.batches.private()
            with torch.no_grad():
                a = self.nets.fa(x)
            bce, acc = self._attacker_step(a, yb, active=active)
            first = bce if first is None else first
            if r.budget_threshold is None:
                break
            stepped = [i for i, on in enumerate(active) if on]
            for i, value in zip(stepped, acc, strict=True):
                active[i] = _mean_across_ranks(value) <= r.budget_threshold
            if not any(active):
                break
        assert first is not None
        return first

    def _train(self, round_: int, stage: _Stage) -> None:
        """Fresh attackers trained on the current f_A's output, computed once on
        `budget_clips` clips: like the evaluation's attackers, they learn from fixed
        anonymized data, and no f_A forward pass is spent per step."""
        self._new(round_)
        r, batches = self.r, self.batches
        shares = [batches.private() for _ in range(math.ceil(r.budget_clips / r.batch))]
        with torch.no_grad():
            anon = torch.cat([self.nets.fa(x) for x, _ in shares])
        labels = torch.cat([yb for _, yb in shares])
        n, t = anon.shape[0], anon.shape[2]
        per_rank = max(1, r.batch // batches.world)
        # a generator of this rank's own: its share may differ in size from the others'
        rng = np.random.default_rng([r.seed, 23, round_, batches.rank])
        for _ in range(r.budget_steps):
            idx = torch.from_numpy(rng.integers(0, n, per_rank)).to(self.device)
            picks = torch.from_numpy(rng.integers(0, t, (per_rank, r.budget_frames)))
            bce, _ = self._attacker_step(anon[idx], labels[idx], picks.to(self.device))
            stage.step(bce=bce)
        _sync_buffers(*self.attackers)

    def pretrain(self) -> list[_Stage]:
        stage = _Stage("privacy", self.r.budget_steps, self.progress)
        self._train(0, stage)
        return [stage]

    def _privacy_term(self, a: torch.Tensor, yb: torch.Tensor,
                      picks: torch.Tensor | None = None) -> tuple[torch.Tensor, str, int]:
        """Against the strongest attacker: Entropy, its negative entropy (the most confident
        one); GRL and K-Beam, minus its BCE (the one of lowest loss). MPPAR: minus the mean
        BCE of all attackers (index -1). Returns the term, its log name and that attacker."""
        logits = [self._logits(m, a, picks) for m in self.attackers]
        if self.r.method == "vita":
            neg_h = torch.stack([-binary_entropy(z) for z in logits])
            worst = int(np.argmax([_mean_across_ranks(v) for v in neg_h]))
            return neg_h[worst], "fa_neg_entropy", worst
        bce = torch.stack([F.binary_cross_entropy_with_logits(z, yb) for z in logits])
        if self.r.method == "mppar":  # L's privacy part: all of f_train^P
            return -bce.mean(), "fa_neg_bce", -1
        best = int(np.argmin([_mean_across_ranks(v) for v in bce]))
        return -bce[best], "fa_neg_bce", best

    def _ascend(self, term: torch.Tensor, beam: int) -> None:
        """K-Beam's L_B max step (Eq. 6b-B): `ascent_steps` updates of f_A against beam
        `beam`, picked once (Eq. 6b-A) on the batch `term` came from; each further step on a
        fresh privacy batch."""
        r, nets = self.r, self.nets
        assert isinstance(r, VitaKBeamRecipe)
        _update(nets.opt_a, r.gamma * term)
        for _ in range(r.ascent_steps - 1):
            xp, yb = self.batches.private()
            bce = F.binary_cross_entropy_with_logits(
                self._logits(self.attackers[beam], nets.fa_ddp(xp)), yb)
            _update(nets.opt_a, -r.gamma * bce)

    def iteration(self, it: int) -> dict[str, torch.Tensor]:
        """The f_A step on its privacy term (plus L_T, except for K-Beam, which takes
        `ascent_steps` of them and whose utility comes from the joint step) with f_T and the
        attackers frozen, one joint f_A + f_T step on L_T, the attackers' supervised step(s)
        (`_attackers_learn`); the attackers restart every `restart_every` iterations."""
        r, nets = self.r, self.nets
        if it > 0 and it % r.restart_every == 0:
            self._train(it // r.restart_every, self.restart)
        x, y, xp, yb = self.batches.both()
        with _frozen(nets.ft, *self.attackers):
            a, ap = _anonymize_both(nets.fa_ddp, x, xp)
            term, name, beam = self._privacy_term(ap, yb)
            logged = {name: term}
            if r.method == "vita-kbeam":
                self._ascend(term, beam)
            else:
                lt = F.cross_entropy(nets.ft(a), y)
                _update(nets.opt_a, lt + r.gamma * term)
                logged = {"fa_utility": lt, **logged}
        x, y = self.batches.action()
        logits = nets.ft_ddp(nets.fa_ddp(x))
        lt_joint = F.cross_entropy(logits, y)
        _update([nets.opt_a, nets.opt_t], lt_joint)
        bce = self._attackers_learn()
        return {**logged, "ft_ce": lt_joint, "ft_acc": (logits.argmax(1) == y).float().mean(),
                "attacker_bce": bce}

    def term(self, a: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return self._privacy_term(a, yb, _spread(a.shape[2], self.r.budget_frames, len(a),
                                                 self.device))[0]

    def held_out(self, a: torch.Tensor, yb: torch.Tensor) -> dict[str, float]:
        """The strongest attacker's cMAP (%) on the known attributes."""
        picks = _spread(a.shape[2], self.r.budget_frames, len(a), self.device)
        labels = yb.cpu().numpy()
        scores = [cmap_fixed(torch.sigmoid(self._logits(m, a, picks)).cpu().numpy(), labels)[0]
                  for m in self.attackers]
        return {"val_cmap": float(np.nanmax(scores)) if not np.isnan(scores).all()
                else float("nan")}

    def state_dict(self) -> dict:
        return {"round": self.round, "attackers": [m.state_dict() for m in self.attackers],
                "opts": [o.state_dict() for o in self.opts], "restart": self.restart.state()}

    def load_state_dict(self, state: dict) -> None:
        if not state["attackers"]:  # saved before the privacy stage built them
            return
        self._new(int(state["round"]))
        for model, opt, ms, os_ in zip(self.attackers, self.opts, state["attackers"],
                                       state["opts"], strict=True):
            model.load_state_dict(ms)
            opt.load_state_dict(os_)
        self.restart.load(state["restart"])

    def finished(self) -> list[_Stage]:
        return [self.restart] if self.restart.total else []


class _MPPAR(_Vita):
    """MPPAR's virtual training and testing (supplement, Algorithm 1): each epoch splits the
    known attributes and the attack models 60/40; iterations alternate between an
    attribute-different support/query pair of batches (labels of the other side's attributes
    masked) and a model-different pair (support models / query models, full labels). f_A takes
    the meta step phi <- phi - beta * grad(L(phi; S) + L(phi - alpha * grad L(phi; S); Q)), with
    L = L_T - gamma * masked BCE; then f_T and every attack model take a supervised step."""

    def __init__(self, recipe: MPPARRecipe, *args: object) -> None:
        super().__init__(recipe, *args)
        self.mr = recipe
        self.epoch_len = math.ceil(recipe.clips / recipe.batch)
        self._splits: dict[int, tuple[np.ndarray, ...]] = {}

    def _split(self, epoch: int) -> tuple[np.ndarray, ...]:
        """(support attributes mask, query attributes mask, X_1 clip indices, X_2 clip
        indices, support model indices, query model indices) of `epoch`, a pure function of
        the seed and the epoch (so a resumed run splits alike). Clips whose positive labels
        all lie on one side go to it; the others (mixed, or with none) go 60/40 at random.
        Each side keeps only its own attributes' labels."""
        if epoch not in self._splits:
            r, labels = self.mr, self.batches.privacy_pool.attributes > 0
            rng = np.random.default_rng([r.seed, 31, epoch])
            n_attr, n_models = labels.shape[1], len(r.budget_models)
            order = rng.permutation(n_attr)
            cut = min(n_attr - 1, max(1, round(r.support_share * n_attr)))
            first = np.zeros(n_attr, bool)
            first[order[:cut]] = True
            has1, has2 = labels[:, first].any(1), labels[:, ~first].any(1)
            draw = rng.random(len(labels)) < r.support_share
            in1 = np.where(has1 & ~has2, True, np.where(has2 & ~has1, False, draw))
            if in1.all() or not in1.any():
                raise PabenchError(f"mppar: {len(labels)} clips are too few to split into "
                                   "attribute-different support and query sets")
            models = rng.permutation(n_models)
            m_cut = min(n_models - 1, max(1, round(r.support_share * n_models)))
            self._splits[epoch] = (first, ~first, np.flatnonzero(in1), np.flatnonzero(~in1),
                                   models[:m_cut], models[m_cut:])
        return self._splits[epoch]

    def _loss(self, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
              xp: torch.Tensor, yb: torch.Tensor, mask: torch.Tensor, models: list[nn.Module],
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """L = L_T - gamma * BCE over the attack models `models` and the labels `mask` keeps
        (L_T on action clips `x`, the BCE on privacy clips `xp`)."""
        a, ap = _anonymize_both(
            lambda v: torch.func.functional_call(self.nets.fa, params, (v,)), x, xp)
        lt = F.cross_entropy(self.nets.ft(a), y)
        weight = mask.expand_as(yb)
        bce = torch.stack([F.binary_cross_entropy_with_logits(
            self._logits(m, ap), yb, weight=weight, reduction="sum") / weight.sum()
            for m in models]).mean()
        return lt - self.mr.gamma * bce, lt, bce

    def iteration(self, it: int) -> dict[str, torch.Tensor]:
        r, nets, b = self.mr, self.nets, self.batches
        if it > 0 and it % r.restart_every == 0:
            self._train(it // r.restart_every, self.restart)
        attr_s, attr_q, x1, x2, m_s, m_q = self._split(it // self.epoch_len)
        full = torch.ones(len(attr_s), device=self.device)
        if it % 2 == 0:  # attribute-different sets (the supplement's odd I, counting from 1)
            (xs, ys, xps, ybs), (xq, yq, xpq, ybq) = b.both(among=x1), b.both(among=x2)
            mask_s = torch.from_numpy(attr_s).float().to(self.device)
            mask_q = torch.from_numpy(attr_q).float().to(self.device)
            models_s = models_q = self.attackers
        else:  # model-different sets
            (xs, ys, xps, ybs), (xq, yq, xpq, ybq) = b.both(), b.both()
            mask_s = mask_q = full
            models_s = [self.attackers[i] for i in m_s]
            models_q = [self.attackers[i] for i in m_q]
        params = dict(nets.fa.named_parameters())
        with _frozen(nets.ft, *self.attackers):
            l_tr, lt, _ = self._loss(params, xs, ys, xps, ybs, mask_s, models_s)
            grads = torch.autograd.grad(l_tr, list(params.values()), retain_graph=True,
                                        create_graph=not r.first_order)
            fast = {k: v - r.inner_lr * (g.detach() if r.first_order else g)
                    for (k, v), g in zip(params.items(), grads, strict=True)}
            l_te, _, bce_q = self._loss(fast, xq, yq, xpq, ybq, mask_q, models_q)
            nets.opt_a.zero_grad(set_to_none=True)
            (l_tr + l_te).backward()
            if is_distributed():  # the bare f_A, not its DDP wrapper: average by hand
                for p in nets.fa.parameters():
                    if p.grad is not None:
                        dist.all_reduce(p.grad)
                        p.grad /= dist.get_world_size()
            nets.opt_a.step()
        x, y = b.action()
        with torch.no_grad():
            a = nets.fa(x)
        logits = nets.ft_ddp(a)
        lt_t = F.cross_entropy(logits, y)
        _update(nets.opt_t, lt_t)
        bce = self._attackers_learn()
        return {"fa_utility": lt, "fa_meta_train": l_tr, "fa_meta_test": l_te,
                "fa_query_bce": bce_q, "ft_ce": lt_t,
                "ft_acc": (logits.argmax(1) == y).float().mean(), "attacker_bce": bce}


PHASES = ("identity", "target", "privacy", "minimax")
AnonymizerAmp = Literal["auto", "off", "bf16"]


def anonymizer_autocast(amp: AnonymizerAmp, device: str) -> torch.dtype | None:
    """f_A's training dtype: bf16 autocast on a GPU that has it (`auto`), float32 elsewhere.
    Not fp16: its loss scaling would have to span the minimax's several optimizers and
    MPPAR's second-order step, so a GPU without bf16 trains in float32."""
    dtype = autocast_dtype(amp, device)
    return None if dtype == torch.float16 else dtype


class _Run:
    """One training run, in phases that a checkpoint can stop between: the identity,
    target and privacy pretraining stages, then minimax iterations."""

    def __init__(self, recipe: AnyRecipe, source: TrainingSource, device: str,
                 progress: Progress | None, amp: AnonymizerAmp = "auto") -> None:
        _check_models("recipe", recipe)
        self.amp = anonymizer_autocast(amp, device)
        torch.manual_seed(recipe.seed)
        self.recipe, self.source, self.device, self.progress = recipe, source, device, progress
        self.size = source.size
        self.batches = Batches(*source.pools(recipe.clips, recipe.seed), recipe.batch,
                               recipe.seed, device, source.frames)
        fa = AnonymizerUNet(recipe.width).to(device)
        ft = build_model(recipe.target, len(source.action_classes), self.size).to(device)
        self.nets = _Nets(fa, wrap_ddp(fa, device), ft, wrap_ddp(ft, device),
                          torch.optim.Adam(fa.parameters(), lr=recipe.anonymizer_lr),
                          torch.optim.Adam(ft.parameters(), lr=recipe.target_lr))
        args = (self.nets, self.batches, self.size, device, progress)
        self.privacy: _Privacy = (
            _SSL(recipe, *args) if isinstance(recipe, SPActRecipe)
            else _MPPAR(recipe, *args) if isinstance(recipe, MPPARRecipe)
            else _Vita(recipe, *args))
        self.done = 0  # phases completed
        self.minimax = _Stage("minimax", recipe.steps, progress)
        self.losses: dict[str, dict[str, float]] = {}
        self.snapshots: list[dict] = []  # with `select_every`: f_A kept for the selection

    @property
    def epoch(self) -> int:
        """Minimax iterations per epoch: one pass over the training clips' worth of batches."""
        return math.ceil(len(self.batches.action_pool) / self.recipe.batch)

    def pretrain(self, log: Log | None = None,
                 after: Callable[[], None] | None = None) -> None:
        """The phases before the minimax one that have not run yet; `after` each of them."""
        phases: list[Callable[[], list[_Stage]]] = [
            lambda: [pretrain_identity(self.nets.fa_ddp, self.batches, self.recipe,
                                       self.progress)],
            lambda: [_pretrain_target(self.nets, self.batches, self.recipe, self.progress)],
            self.privacy.pretrain,
        ]
        for phase in phases[self.done:]:
            with self._autocast():
                stages = phase()
            for stage in stages:
                self._finish(stage, log)
            self.done += 1
            if after:
                after()

    def _finish(self, stage: _Stage, log: Log | None) -> None:
        self.losses[stage.name] = stage.summary()
        if log:
            log(stage.name, self.losses[stage.name])

    def iterate(self, every: Callable[[int], None] | None = None) -> None:
        """The remaining minimax iterations; `every(done)` after each."""
        for it in range(self.minimax.done, self.recipe.steps):
            with self._autocast():
                losses = self.privacy.iteration(it)
            self.minimax.step(**losses)
            if every:
                every(self.minimax.done)

    def _autocast(self) -> torch.autocast:
        """Training steps under `amp`, backward passes included (their ops take the forward's
        dtypes either way). No cast cache: weights change inside a region, at every optimizer
        step, and a cached bf16 copy would go stale."""
        return torch.autocast(torch.device(self.device).type, self.amp,
                              enabled=self.amp is not None, cache_enabled=False)

    def keep(self, val: tuple[ClipPool, ClipPool | None]) -> None:
        """Keep f_A's weights now, with their held-out top-1 (on every rank: the selection's
        probes train under DDP)."""
        self.snapshots.append({"step": self.minimax.done,
                               "val_top1": self.measure(val)["val_top1"],
                               "weights": {k: v.detach().cpu().clone()
                                           for k, v in self.nets.fa.state_dict().items()}})

    def finish(self, log: Log | None = None,
               rows: list[dict[str, float]] | None = None) -> TrainResult:
        _sync_buffers(self.nets.ft, *self.privacy.models())
        for stage in (*self.privacy.finished(), self.minimax):
            self._finish(stage, log)
        selection = []
        if len(self.snapshots) > 1:  # the first is the reference, before the minimax
            selection = select_snapshot(self.nets.fa, self.snapshots, self.source.preset,
                                        seed=self.recipe.seed, device=self.device,
                                        progress=self.progress)
        return TrainResult(self.nets.fa.cpu().eval(), self.losses, curves=rows or [],
                           selection=selection)

    def _anonymized(self, pool: ClipPool, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A held-out pool's clips (middle frames) and f_A's output on them."""
        parts = []
        for i in range(0, len(pool), chunk):
            x = as_tensor(pool, np.arange(i, min(i + chunk, len(pool))), self.source.frames,
                          self.device)
            parts.append((x, self.nets.fa(x)))
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    def measure(self, val: tuple[ClipPool, ClipPool | None], chunk: int = 16,
                ) -> dict[str, float]:
        """Held-out utility (f_T top-1 on f_A's output, %), how far f_A moves an action clip
        (RMS), f_A's privacy term, and the method's own privacy measures (on the privacy
        clips); in float32 under any `amp`, as the exported f_A runs."""
        action, privacy = val
        with _evaluating(self.nets.fa, self.nets.ft, batch_stats=tuple(self.privacy.models())):
            x, a = self._anonymized(action, chunk)
            ap = a if privacy is None else self._anonymized(privacy, chunk)[1]
            yb = torch.from_numpy((action if privacy is None else privacy).attributes
                                  ).to(self.device)
            correct = (self.nets.ft(a).argmax(1).cpu().numpy() == action.actions)
            return {"val_top1": 100 * float(correct.mean()),
                    "val_rms": float((x - a).pow(2).flatten(1).mean(1).sqrt().mean()),
                    "val_privacy_term": float(self.privacy.term(ap, yb)),
                    **self.privacy.held_out(ap, yb)}

    def state(self) -> dict:
        state = {
            "recipe": self.recipe.model_dump_json(), "data": self.source.key, "done": self.done,
            "fa": self.nets.fa.state_dict(), "ft": self.nets.ft.state_dict(),
            "opt_a": self.nets.opt_a.state_dict(), "opt_t": self.nets.opt_t.state_dict(),
            "privacy": self.privacy.state_dict(), "minimax": self.minimax.state(),
            "losses": self.losses, "batches": self.batches.rng.bit_generator.state,
            "snapshots": self.snapshots,
            "torch_rng": torch.get_rng_state(),
        }
        if self.device.startswith("cuda"):
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        return state

    def load(self, state: dict, source: Path) -> None:
        if state.get("recipe") != self.recipe.model_dump_json() or state.get(
                "data") != self.source.key:
            raise PabenchError(f"checkpoint {source}: was written for another recipe or "
                               "training data")
        self.done = int(state["done"])
        self.nets.fa.load_state_dict(state["fa"])
        self.nets.ft.load_state_dict(state["ft"])
        self.nets.opt_a.load_state_dict(state["opt_a"])
        self.nets.opt_t.load_state_dict(state["opt_t"])
        self.privacy.load_state_dict(state["privacy"])
        self.minimax.load(state["minimax"])
        self.losses = state["losses"]
        self.snapshots = state.get("snapshots", [])
        self.batches.rng.bit_generator.state = state["batches"]
        torch.set_rng_state(state["torch_rng"])  # last: rebuilding attackers reseeds
        if "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)


def train_anonymizer(recipe: AnyRecipe, source: TrainingSource | str, *, device: str = "cpu",
                     progress: Progress | None = None, log: Log | None = None,
                     curves: Curves | None = None, eval_every: int = 25, eval_clips: int = 64,
                     checkpoint: Path | None = None, resume: bool = False,
                     amp: AnonymizerAmp = "auto") -> TrainResult:
    """Train f_A with `recipe` on the clips of `source` (a `TrainingSource`, or the name of a
    pa-synth preset), its training steps under `amp` (see `anonymizer_autocast`);
    deterministic for a given world size.

    With `curves`, rank 0 adds a row of losses and held-out measures (`eval_clips` clips of the
    namespace's "val" split) after the pretraining and every `eval_every` minimax iterations.
    With `checkpoint`, rank 0 saves the run after each pretraining stage and every epoch;
    `resume` continues from that file when it exists (every rank reads it). With the recipe's
    `select_every`, f_A is kept before the minimax, every `select_every` iterations and at the
    end, and the result is the kept one `select_snapshot` picks."""
    source = synth_source(source) if isinstance(source, str) else source
    select = recipe.select_every
    if select is not None and source.real:
        raise PabenchError("recipe: select_every probes pa-synth's held-out clips; a real-data "
                           "training cannot select (remove it)")
    run = _Run(recipe, source, device, progress, amp)
    if checkpoint is not None and resume and checkpoint.is_file():
        try:
            state = torch.load(checkpoint, map_location=device, weights_only=True)
        except Exception as e:  # torch.load raises many types on a damaged file
            raise PabenchError(f"checkpoint {checkpoint}: unreadable ({type(e).__name__}); "
                               "run again without --resume") from None
        run.load(state, checkpoint)
        if curves is not None:
            curves.restore(state.get("rows", []))
    rank0 = is_rank0()
    val = source.held_out(eval_clips, recipe.seed) if curves and rank0 else None
    kept = source.held_out(eval_clips, recipe.seed) if select is not None else None

    def save() -> None:
        if checkpoint is not None and rank0:
            state = {**run.state(), "rows": curves.rows if curves else []}
            atomic_write(checkpoint, lambda tmp: torch.save(state, tmp))

    def observe() -> None:
        if curves is not None and val is not None:
            curves.add({"step": float(run.minimax.done),
                        **run.minimax.recent(eval_every), **run.measure(val)}, recipe.steps)

    if run.done < len(PHASES) - 1:
        def after() -> None:
            if run.done == len(PHASES) - 1:
                observe()
                if kept is not None:
                    run.keep(kept)
            save()
        run.pretrain(log, after)

    def every(done: int) -> None:
        if done % eval_every == 0 or done == recipe.steps:
            observe()
        if kept is not None and select is not None and (done % select == 0
                                                        or done == recipe.steps):
            run.keep(kept)
        if done % run.epoch == 0 and done < recipe.steps:
            save()

    run.iterate(every)
    barrier()
    return run.finish(log, curves.rows if curves else None)
