"""VITA's privacy side: a supervised attacker ensemble, restarted, and its three solvers.

VITA (Wu et al., TPAMI), with model restarting and an ensemble of M attackers: f_A's privacy
term is taken against the strongest attacker; every attacker takes a supervised step per
iteration and all are re-initialised every `restart_every` iterations. The three solvers of
the paper differ in that term: "entropy" (Ours-Entropy: L_T + gamma * max_i -H(f_B^i)),
"grl" (L_T - gamma * min_i L_B^i, the gradient-reversal update) and "kbeam" (Ours-K-Beam:
-gamma * L_B^j for the beam j of lowest loss, the utility coming from the joint step). They
share everything else, so they are one class; MPPAR (`mppar`) builds on its attacker set."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pabench.metrics import cmap_fixed
from pabench.models import build_model
from pabench.runtime import wrap_ddp
from pabench.training.methods.base import (
    _anonymize_both,
    _frozen,
    _mean_across_ranks,
    _Privacy,
    _spread,
    _Stage,
    _sync_buffers,
    _take_frames,
    _update,
)
from pabench.training.methods.recipes import VitaKBeamRecipe, VitaRecipe


def binary_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of independent Bernoulli predictions: maximal (log 2) when the
    attacker is maximally unsure."""
    p = torch.sigmoid(logits)
    return (F.softplus(logits) - p * logits).mean()


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
