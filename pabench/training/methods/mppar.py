"""MPPAR's meta-learned f_A update over VITA's attacker set.

MPPAR (Peng et al., NeurIPS 2023): the same attacker set as VITA, no restarts; f_A is updated
only by a meta step over support/query sets that differ in attributes (labels masked) or in
attack models, split 60/40 each epoch (its supplement's Algorithm 1 and set construction). The
attackers' training and the privacy term are VITA's (`vita`), so `_MPPAR` extends `_Vita`."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from pabench.errors import PabenchError
from pabench.runtime import is_distributed
from pabench.training.methods.base import _anonymize_both, _frozen, _update
from pabench.training.methods.recipes import MPPARRecipe
from pabench.training.methods.vita import _Vita


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
        self.epoch_len = math.ceil(len(self.batches.action_pool) / recipe.batch)
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
