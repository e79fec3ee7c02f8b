"""Training of the learned anonymizer baselines: SPAct (self-supervised) and VITA (supervised).

Both start as the papers do: the U-Net f_A is pretrained to the identity by L1 reconstruction,
then the utility model f_T (action classes) and the privacy side f_B are trained on its output.
The minimax phase then alternates an f_A update against frozen f_T/f_B with updates of f_T/f_B
on the current f_A output:

* SPAct (Dave et al., CVPR 2022): f_B is a 2D CNN with a two-layer projection head trained with
  NT-Xent on two frames of one clip (positives) against the other clips' frames; f_A minimises
  L_T - omega * L_NT-Xent, so frames of one video stop agreeing. No privacy labels.
* VITA (Wu et al., TPAMI): f_B is an ensemble of supervised attackers on the known attributes
  (logits averaged over frames); f_A minimises L_T plus gamma times the negative entropy of the
  most confident attacker, then f_A and f_T take a joint utility step, then every attacker a
  supervised step; the attackers are re-initialised and retrained every `restart_every` steps.

Where the papers loop "until accuracy reaches a threshold", each iteration here takes a fixed
number of updates, so a recipe has a known cost. Data are clips rendered from a seed namespace
of their own (`TRAIN_DATASET`) with known actions only: no benchmark split is ever seen.

Under torchrun every trained model is wrapped in DistributedDataParallel and each rank takes a
slice of every batch (the batch indices come from one seeded generator, identical on all ranks);
stopping decisions use all-reduced losses, so all ranks run the same number of steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from torch import nn

from pabench.anonymizers.learned import GROUPS, TRAIN_DATASET, AnonymizerUNet
from pabench.data.synth import KNOWN_ACTIONS, KNOWN_ATTRIBUTES, clip_rng, get_preset, render_clip
from pabench.errors import PabenchError, unknown_name
from pabench.models import MODELS, build_model
from pabench.runtime import (
    Progress,
    is_distributed,
    rank_world,
    read_json,
    validation_error,
    wrap_ddp,
)

Log = Callable[[str, dict[str, float]], None]
METHODS = ("spact", "vita")


class _Recipe(BaseModel):
    """Settings shared by both methods. Defaults are the leaderboard settings for pa-synth
    (`baselines/*.json` holds the same values); sized so that a tiny-preset run takes about
    five minutes on one CPU thread."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    clips: int = Field(1024, ge=8, description="training clips rendered (known actions)")
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


class SPActRecipe(_Recipe):
    method: Literal["spact"] = "spact"
    ssl_model: str = Field("tiny2d", description="2D backbone of the privacy branch f_B")
    ssl_hidden: int = Field(128, ge=1, description="backbone output = projection head input")
    ssl_dim: int = Field(128, ge=1, description="projection size the NT-Xent loss sees")
    ssl_steps: int = Field(150, ge=0, description="f_B pretraining steps on f_A's output")
    ssl_lr: float = 2e-3
    temperature: float = Field(0.1, gt=0)
    omega: float = Field(1.0, gt=0, description="weight of -NT-Xent in f_A's loss")


class VitaRecipe(_Recipe):
    method: Literal["vita"] = "vita"
    steps: int = Field(200, ge=0, description="minimax iterations (each costs about two "
                                              "SPAct iterations)")
    budget_models: tuple[str, ...] = Field(("tiny2d", "tiny-resnet2d"), min_length=1,
                                           description="the attacker ensemble (frame models)")
    budget_frames: int = Field(4, ge=1, description="frames per clip an attacker averages")
    budget_clips: int = Field(256, ge=1, description="clips anonymized once per (re)start "
                                                     "for the attackers to train on")
    budget_steps: int = Field(500, ge=0, description="attacker training steps at the start "
                                                     "and after each restart")
    budget_lr: float = 2e-3
    gamma: float = Field(2.0, gt=0, description="weight of the negative entropy in f_A's loss")
    restart_every: int = Field(100, ge=1, description="re-initialise the attackers every N "
                                                      "minimax iterations")


Recipe = Annotated[SPActRecipe | VitaRecipe, Field(discriminator="method")]
RECIPES: dict[str, type[SPActRecipe] | type[VitaRecipe]] = {"spact": SPActRecipe,
                                                             "vita": VitaRecipe}


def default_recipe(method: str) -> SPActRecipe | VitaRecipe:
    if method not in RECIPES:
        raise unknown_name("learned baseline", method, RECIPES)
    return RECIPES[method]()


def load_recipe(path: Path, method: str) -> SPActRecipe | VitaRecipe:
    """Read a recipe file for `method`; any problem is one line naming the file."""
    if method not in RECIPES:
        raise unknown_name("learned baseline", method, RECIPES)
    data = read_json(path, f"recipe {path}")
    if isinstance(data, dict):
        data = {"method": method, **data}
    try:
        recipe = TypeAdapter(Recipe).validate_python(data)
    except ValidationError as e:
        raise validation_error(f"recipe {path}", e, skip=1) from None
    if recipe.method != method:
        raise PabenchError(f"recipe {path}: is a '{recipe.method}' recipe, not '{method}'")
    _check_models(path, recipe)
    return recipe


def _check_models(source: Path | str, recipe: SPActRecipe | VitaRecipe) -> None:
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


# ---------------------------------------------------------------- data


@dataclass
class ClipPool:
    """Rendered training clips, uint8 [N, 3, T, H, W], with their action and known-attribute
    labels (the attributes are used by VITA only)."""

    videos: torch.Tensor
    actions: torch.Tensor  # int64 [N]
    attributes: torch.Tensor  # float32 [N, len(KNOWN_ATTRIBUTES)]


def render_pool(preset: str, clips: int, seed: int = 0) -> ClipPool:
    """Clips from the anonymizer's own seed namespace, known actions in turn (balanced)."""
    p = get_preset(preset)
    videos, actions, attrs = [], [], []
    for i in range(clips):
        action = KNOWN_ACTIONS[i % len(KNOWN_ACTIONS)]
        clip = render_clip(clip_rng(seed, TRAIN_DATASET, "train", i), action, p.frames, p.size)
        videos.append(torch.from_numpy(clip.video).permute(3, 0, 1, 2))
        actions.append(KNOWN_ACTIONS.index(action))
        attrs.append([clip.attributes[a] for a in KNOWN_ATTRIBUTES])
    return ClipPool(torch.stack(videos), torch.tensor(actions),
                    torch.tensor(attrs, dtype=torch.float32))


class Batches:
    """Random batches drawn from one seeded generator, so every rank draws the same indices
    and frames and keeps its own slice."""

    def __init__(self, pool: ClipPool, batch: int, seed: int, device: str) -> None:
        self.pool, self.batch, self.device = pool, batch, device
        self.rng = np.random.default_rng([seed, 17])
        self.rank, self.world = rank_world()
        if batch < 2 * self.world:
            raise PabenchError(f"batch {batch} is too small for {self.world} ranks "
                               "(each needs at least 2 clips)")

    def next(self, size: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """This rank's share of `size` (default: the recipe's batch) random clips: video in
        [0, 1], action index, known-attribute labels."""
        size = size or self.batch
        if size < self.world:
            raise PabenchError(f"batch {size} is smaller than the {self.world} ranks")
        idx = self.rng.integers(0, len(self.pool.videos), size)[self.rank::self.world]
        x = self.pool.videos[idx].to(self.device).float().div_(255)
        return (x, self.pool.actions[idx].to(self.device),
                self.pool.attributes[idx].to(self.device))

    def frames(self, t: int, k: int, distinct: bool = False) -> torch.Tensor:
        """`k` of `t` frame indices per clip of a batch: [this rank's clips, k]."""
        if distinct:
            picks = np.stack([self.rng.choice(t, k, replace=False) for _ in range(self.batch)])
        else:
            picks = self.rng.integers(0, t, (self.batch, k))
        return torch.from_numpy(picks[self.rank::self.world]).to(self.device)


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

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"steps": float(self.done)}
        for k, vals in self.history.items():
            m = max(1, len(vals) // 10)
            out[f"{k}_start"] = float(np.mean(vals[:m]))
            out[f"{k}_end"] = float(np.mean(vals[-m:]))
        return out


# ---------------------------------------------------------------- training


def train_anonymizer(recipe: SPActRecipe | VitaRecipe, preset: str, *, device: str = "cpu",
                     progress: Progress | None = None, log: Log | None = None) -> TrainResult:
    """Train f_A with `recipe` on `preset`-sized clips; deterministic for a given world size."""
    _check_models("recipe", recipe)
    torch.manual_seed(recipe.seed)
    pool = render_pool(preset, recipe.clips, recipe.seed)
    size = get_preset(preset).size
    batches = Batches(pool, recipe.batch, recipe.seed, device)
    losses: dict[str, dict[str, float]] = {}

    def finish(stage: _Stage) -> None:
        losses[stage.name] = stage.summary()
        if log:
            log(stage.name, losses[stage.name])

    fa = AnonymizerUNet(recipe.width).to(device)
    ft = build_model(recipe.target, len(KNOWN_ACTIONS), size).to(device)
    nets = _Nets(fa, wrap_ddp(fa, device), ft, wrap_ddp(ft, device),
                 torch.optim.Adam(fa.parameters(), lr=recipe.anonymizer_lr),
                 torch.optim.Adam(ft.parameters(), lr=recipe.target_lr))
    finish(pretrain_identity(nets.fa_ddp, batches, recipe, progress))
    finish(_pretrain_target(nets, batches, recipe, progress))
    train = _train_spact if isinstance(recipe, SPActRecipe) else _train_vita
    for stage in train(nets, batches, recipe, size, device, progress):  # type: ignore[arg-type]
        finish(stage)
    return TrainResult(fa.cpu().eval(), losses)


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
        x, _, _ = batches.next(recipe.identity_batch)
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
        x, y, _ = batches.next()
        with torch.no_grad():
            a = nets.fa(x)
        logits = nets.ft_ddp(a)
        loss = F.cross_entropy(logits, y)
        _update(nets.opt_t, loss)
        stage.step(ce=loss, acc=(logits.argmax(1) == y).float().mean())
    _sync_buffers(nets.ft)
    return stage


def _train_spact(nets: _Nets, batches: Batches, recipe: SPActRecipe, size: int, device: str,
                 progress: Progress | None) -> list[_Stage]:
    """SPAct: pretrain the NT-Xent branch on f_A's output, then per iteration one f_A step on
    L_T - omega * L_B with f_T and f_B frozen, and on the next batch one step of each of f_T
    (L_T) and f_B (L_B) with f_A frozen."""
    fb = SSLModel(recipe.ssl_model, recipe.ssl_hidden, recipe.ssl_dim, size).to(device)
    fb_ddp = wrap_ddp(fb, device)
    opt_b = torch.optim.Adam(fb.parameters(), lr=recipe.ssl_lr)

    def ssl_loss(model: nn.Module, video: torch.Tensor) -> torch.Tensor:
        n, c, t, h, w = video.shape
        picks = batches.frames(t, 2, distinct=True)  # SPAct's random temporal sampler
        z = model(_take_frames(video, picks)).view(n, 2, -1)
        return nt_xent(z[:, 0], z[:, 1], recipe.temperature)

    pre = _Stage("privacy", recipe.ssl_steps, progress)
    fb.train()
    for _ in range(recipe.ssl_steps):
        x, _, _ = batches.next()
        with torch.no_grad():
            a = nets.fa(x)
        loss = ssl_loss(fb_ddp, a)
        _update(opt_b, loss)
        pre.step(nt_xent=loss)
    _sync_buffers(fb)

    stage = _Stage("minimax", recipe.steps, progress)
    for _ in range(recipe.steps):
        x, y, _ = batches.next()
        with _frozen(nets.ft, fb):
            a = nets.fa_ddp(x)
            lt = F.cross_entropy(nets.ft(a), y)
            lb = ssl_loss(fb, a)
            _update(nets.opt_a, lt - recipe.omega * lb)
        x, y, _ = batches.next()
        with torch.no_grad():
            a = nets.fa(x)
        logits = nets.ft_ddp(a)
        lt_t = F.cross_entropy(logits, y)
        _update(nets.opt_t, lt_t)
        lb_b = ssl_loss(fb_ddp, a)
        _update(opt_b, lb_b)
        stage.step(fa_utility=lt, fa_nt_xent=lb, ft_ce=lt_t, fb_nt_xent=lb_b,
                   ft_acc=(logits.argmax(1) == y).float().mean())
    _sync_buffers(nets.ft, fb)
    return [pre, stage]


def _train_vita(nets: _Nets, batches: Batches, recipe: VitaRecipe, size: int, device: str,
                progress: Progress | None) -> list[_Stage]:
    """VITA (Ours-Entropy with model restarting and ensemble): per iteration one f_A step on
    L_T + gamma * max_i(-H(f_B^i)) with f_T and the attackers frozen, one joint f_A + f_T step
    on L_T, one supervised step of every attacker; attackers restart every `restart_every`."""
    n_attr = len(KNOWN_ATTRIBUTES)
    restarts = max(0, (recipe.steps - 1) // recipe.restart_every)

    def new_attackers(round_: int) -> tuple[list[nn.Module], list[nn.Module], list]:
        torch.manual_seed(recipe.seed + 1 + round_)  # the same fresh weights on every rank
        models = [build_model(m, n_attr, size).to(device) for m in recipe.budget_models]
        opts = [torch.optim.Adam(m.parameters(), lr=recipe.budget_lr) for m in models]
        return models, [wrap_ddp(m, device) for m in models], opts

    def logits_of(model: nn.Module, video: torch.Tensor,
                  picks: torch.Tensor | None = None) -> torch.Tensor:
        """Frame logits averaged over `budget_frames` random frames of each clip (VITA)."""
        n, t = video.shape[0], video.shape[2]
        if picks is None:
            picks = batches.frames(t, recipe.budget_frames)
        return model(_take_frames(video, picks)).view(n, picks.shape[1], -1).mean(1)

    def attacker_step(wrapped: list[nn.Module], opts: list, a: torch.Tensor, yb: torch.Tensor,
                      picks: torch.Tensor | None = None) -> torch.Tensor:
        """One supervised step of every attacker on anonymized clips; returns the mean BCE."""
        bce = []
        for model, opt in zip(wrapped, opts, strict=True):
            loss = F.binary_cross_entropy_with_logits(logits_of(model, a, picks), yb)
            _update(opt, loss)
            bce.append(loss.detach())
        return torch.stack(bce).mean()

    def train_attackers(round_: int, stage: _Stage) -> tuple[list[nn.Module], list[nn.Module],
                                                            list]:
        """Fresh attackers trained on the current f_A's output, computed once on
        `budget_clips` clips: like the evaluation's attackers, they learn from fixed
        anonymized data, and no f_A forward pass is spent per step."""
        models, wrapped, opts = new_attackers(round_)
        shares = [batches.next() for _ in range(math.ceil(recipe.budget_clips / recipe.batch))]
        with torch.no_grad():
            anon = torch.cat([nets.fa(x) for x, _, _ in shares])
        labels = torch.cat([yb for _, _, yb in shares])
        n, t = anon.shape[0], anon.shape[2]
        per_rank = max(1, recipe.batch // batches.world)
        # a generator of this rank's own: its share may differ in size from the others'
        rng = np.random.default_rng([recipe.seed, 23, round_, batches.rank])
        for _ in range(recipe.budget_steps):
            idx = torch.from_numpy(rng.integers(0, n, per_rank)).to(device)
            picks = torch.from_numpy(rng.integers(0, t, (per_rank, recipe.budget_frames)))
            stage.step(bce=attacker_step(wrapped, opts, anon[idx], labels[idx],
                                         picks.to(device)))
        _sync_buffers(*models)
        return models, wrapped, opts

    pre = _Stage("privacy", recipe.budget_steps, progress)
    models, wrapped, opts = train_attackers(0, pre)
    restart = _Stage("restarts", restarts * recipe.budget_steps, progress)
    stage = _Stage("minimax", recipe.steps, progress)
    for it in range(recipe.steps):
        if it > 0 and it % recipe.restart_every == 0:
            models, wrapped, opts = train_attackers(it // recipe.restart_every, restart)
        x, y, _ = batches.next()
        with _frozen(nets.ft, *models):
            a = nets.fa_ddp(x)
            lt = F.cross_entropy(nets.ft(a), y)
            neg_h = torch.stack([-binary_entropy(logits_of(m, a)) for m in models])
            worst = int(np.argmax([_mean_across_ranks(v) for v in neg_h]))  # most confident
            _update(nets.opt_a, lt + recipe.gamma * neg_h[worst])
        x, y, _ = batches.next()
        logits = nets.ft_ddp(nets.fa_ddp(x))
        lt_joint = F.cross_entropy(logits, y)
        _update([nets.opt_a, nets.opt_t], lt_joint)
        x, _, yb = batches.next()
        with torch.no_grad():
            a = nets.fa(x)
        bce = attacker_step(wrapped, opts, a, yb)
        stage.step(fa_utility=lt, fa_neg_entropy=neg_h[worst], ft_ce=lt_joint,
                   ft_acc=(logits.argmax(1) == y).float().mean(), attacker_bce=bce)
    _sync_buffers(nets.ft, *models)
    return [pre, restart, stage] if restarts else [pre, stage]
