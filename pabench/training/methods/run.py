"""One training run of a learned baseline, whatever its method: phases, checkpoints, curves.

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
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from pabench.anonymizers.learned import AnonymizerUNet
from pabench.errors import PabenchError
from pabench.io import Progress, atomic_write
from pabench.models import build_model
from pabench.runtime import barrier, is_rank0, wrap_ddp
from pabench.training import autocast_dtype
from pabench.training.curves import Curves
from pabench.training.held_out import select_snapshot
from pabench.training.methods.base import (
    TrainResult,
    _evaluating,
    _Nets,
    _pretrain_target,
    _Privacy,
    _Stage,
    _sync_buffers,
    pretrain_identity,
)
from pabench.training.methods.mppar import _MPPAR
from pabench.training.methods.recipes import AnyRecipe, MPPARRecipe, SPActRecipe, _check_models
from pabench.training.methods.spact import _SSL
from pabench.training.methods.vita import _Vita
from pabench.training.pools import Batches, ClipPool, TrainingSource, as_tensor, synth_source

Log = Callable[[str, dict[str, float]], None]
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
        self.source, self.device, self.progress = source, device, progress
        self.size = source.size
        self.batches = Batches(*source.pools(recipe.clips, recipe.seed), recipe.batch,
                               recipe.seed, device, source.frames)
        # the papers' epochs, of these datasets: every stage below counts steps
        self.recipe = recipe = recipe.in_steps(len(self.batches.action_pool),
                                               len(self.batches.privacy_pool))
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
                                        progress=self.progress,
                                        generator=self.source.generator)
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
    recipe = run.recipe  # its epochs in steps
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
