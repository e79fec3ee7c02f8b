"""What every learned method shares: the trained result, the stages that log and report
losses, the f_A/f_T networks and their pretraining, DDP and evaluation helpers, and `_Privacy`,
the interface a method's privacy side implements (`spact`, `vita`, `mppar`), so that the run
loop (`run`) treats every method alike."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from pabench.anonymizers.learned import AnonymizerUNet
from pabench.io import Progress
from pabench.runtime import is_distributed
from pabench.training.methods.recipes import _Recipe
from pabench.training.pools import Batches


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
