"""SPAct's privacy side, and the penalty-driven variant.

* SPAct (Dave et al., CVPR 2022): f_B is a 2D CNN with a two-layer projection head trained with
  NT-Xent on two frames of one clip (positives) against the other clips' frames; f_A minimises
  L_T - omega * L_NT-Xent, so frames of one video stop agreeing. No privacy labels. On real
  data (`ssl_views` "simclr") the pairs are two SimCLR views of privacy-dataset frames, VISPR
  images in the papers' setting.
* penalty (penalty-driven SPAct): SPAct plus lambda * max(0, RMS(X - f_A(X)) - B) per clip in
  f_A's loss, so f_A may not move an action clip further than B from the input.

The penalty lives here rather than in a module of its own: it is SPAct's loop, models and
pretraining unchanged, with one term added to f_A's loss inside the f_A step (on the clips and
output that step already has); only its recipe (`PenaltyRecipe`) is its own."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pabench.models import build_model
from pabench.runtime import wrap_ddp
from pabench.training.augment import simclr, simclr_draw
from pabench.training.methods.base import (
    _anonymize_both,
    _frozen,
    _Privacy,
    _spread,
    _Stage,
    _sync_buffers,
    _take_frames,
    _update,
)
from pabench.training.methods.recipes import PenaltyRecipe, SPActRecipe


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
        t = video.shape[2]
        if picks is None:
            picks = self.batches.frames_of(t, 2, distinct=True)  # SPAct's random temporal sampler
        return self._pair_loss(model, _take_frames(video, picks))

    def _pair_loss(self, model: nn.Module, frames: torch.Tensor) -> torch.Tensor:
        """NT-Xent of frames [2n, 3, H, W], each clip's two in turn."""
        z = model(frames).view(len(frames) // 2, 2, -1)
        return nt_xent(z[:, 0], z[:, 1], self.r.temperature)

    def _views(self) -> torch.Tensor:
        """SPAct's privacy branch input ("simclr"): a batch of privacy clips (VISPR images,
        their labels unused), two distinct frames of each (an image's one frame twice), each
        SimCLR-augmented as its supplement's C.2 says; [2n, 3, 1, H, W], each clip's two views
        in turn, each a still clip (f_A reads a still image's frames alike)."""
        b = self.batches
        xp, _ = b.private()
        frames = _take_frames(xp, b.frames_of(xp.shape[2], 2, distinct=True))
        draw = simclr_draw(b.rng, 2 * b.batch)  # the whole batch's, as every rank draws
        mine = (2 * np.arange(b.batch)[b.rank::b.world])[:, None] + np.array([0, 1])
        return simclr(frames, draw.take(mine.ravel()))[:, :, None]

    def _branch(self, model: nn.Module) -> torch.Tensor:
        """One f_B batch's NT-Xent on f_A's current output, f_A without gradients."""
        if self.r.ssl_views == "simclr":
            with torch.no_grad():
                a = self.nets.fa(self._views())
            return self._pair_loss(model, a[:, :, 0])
        x, _ = self.batches.action()
        with torch.no_grad():
            a = self.nets.fa(x)
        return self._loss(model, a)

    def pretrain(self) -> list[_Stage]:
        stage = _Stage("privacy", self.r.ssl_steps, self.progress)
        self.fb.train()
        for _ in range(self.r.ssl_steps):
            loss = self._branch(self.fb_ddp)
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
            if r.ssl_views == "simclr":  # one f_A pass (DDP): the views as clips of x's length
                views = self._views()
                a, av = _anonymize_both(nets.fa_ddp, x, views.expand(-1, -1, x.shape[2], -1, -1))
            else:
                a = nets.fa_ddp(x)
            lt = F.cross_entropy(nets.ft(a), y)
            lb = (self._loss(self.fb, a) if r.ssl_views == "frames"
                  else self._pair_loss(self.fb, av[:, :, 0]))
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
        lb_b = self._loss(self.fb_ddp, a) if r.ssl_views == "frames" else self._branch(self.fb_ddp)
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
