"""Held-out privacy by a fresh attacker: the measure learned recipes are tuned on.

The curves' `val_cmap` scores f_A against the attackers it trains against, which are weak by
design (short budgets, restarts): VITA's recipe reads 68 there and 90 in the evaluation. Tuning
on it rewards fooling those opponents, not hiding the attributes. This measure does what an
evaluation does, without reading a benchmark split: a fresh attacker of an architecture that
neither trains f_A nor scores any protocol (`tiny-dense2d`) learns the known attributes to
convergence, as the newest `known` protocol on the same generator's clips trains its attackers
(schedule, augmentation and, from v4, standardized inputs: a recipe must not be tuned towards
blinding the attacker), from
f_A's output of held-out clips of the training namespace, and is scored on other held-out
clips of it. From v5 on, whose attackers include one reading each frame standardized by its own
statistics, the same architecture does so too and the measure is the worse of the two: spact's
seed-2 f_A, which left every v4 attacker near chance, reads 49.9 on `tiny-dense2d` alone and
74.5 on its twin (`python benchmarks/held_out_attack.py`).

The same measure, on clips of another seed, picks which of a run's kept f_A a recipe with
`select_every` exports (`select_snapshot`): a minimax's fresh-attacker privacy moves by several
points along one run (vita's recipe run to 600 iterations, seeds 0 and 1: 74.4 and 83.3 after
200 iterations, 79.2 and 76.8 after 600; docs/baselines.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from pabench.data.clipset import as_frames
from pabench.data.synth import GENERATOR_VERSION, KNOWN_ATTRIBUTES, get_preset
from pabench.errors import PabenchError
from pabench.io import Progress
from pabench.metrics import privacy_scores
from pabench.models import MODELS
from pabench.protocols import CATALOG, ProtocolSpec, Schedule
from pabench.training import FitSpec, Trace, fit, predict
from pabench.training.attackers import HELD_OUT_ATTACKER, HELD_OUT_FRAMESTD
from pabench.training.pools import as_tensor, render_pool

TRAIN_CLIPS, TEST_CLIPS = 720, 200  # the size of pa-synth's privacy train and test splits
SELECT_SEED_OFFSET = 1000  # selection probes draw other clips than any check's seed 0-999
SELECT_TOP1_DROP = 5.0  # a kept f_A competes if its held-out top-1 is within this of step 0's


@dataclass(frozen=True)
class HeldOutAttack:
    """The worse fresh attacker's held-out cMAP (%) and traces, every attacker's cMAP, what
    they saw and the protocol (`ID@VERSION`) whose fits they train as: numbers of different
    versions do not compare."""

    model: str
    protocol: str
    cmap: float
    best_epoch: int
    epochs: int
    train_clips: int
    test_clips: int
    seed: int
    traces: list[Trace]
    per_model: dict[str, float]


def known_for(generator: int) -> ProtocolSpec:
    """The newest `known` version reading generator `generator`'s clips: the one whose fits
    the held-out measure trains as (v6 for generator 2, v7 for 3, v8 for 4)."""
    specs = [m.spec for m in CATALOG["known"] if m.spec.data_version == generator]
    if not specs:
        read = sorted({m.spec.data_version for m in CATALOG["known"]})
        raise PabenchError(f"pa-synth generator {generator}: no protocol reads its clips, so "
                           f"there is no held-out measure for them; generators read: {read}")
    return max(specs, key=lambda s: s.version)


def held_out_attackers(known: ProtocolSpec) -> tuple[str, ...]:
    """`tiny-dense2d`, and on frames standardized too where `known` has such an attacker."""
    framestd = any(MODELS.get(a).frame_standardized for a in known.attackers)
    return (HELD_OUT_ATTACKER, *((HELD_OUT_FRAMESTD,) if framestd else ()))


def held_out_attack(anonymize: Callable[[torch.Tensor], torch.Tensor], preset: str, *,
                    seed: int = 0, train_clips: int | None = None,
                    test_clips: int | None = None, device: str = "cpu", batch: int = 32,
                    schedule: Schedule | None = None, progress: Progress | None = None,
                    stage: str = "held-out attacker",
                    generator: int = GENERATOR_VERSION) -> HeldOutAttack:
    """cMAP of fresh `held_out_attackers` (the worse) trained on `anonymize`'s output of
    `train_clips` held-out clips (the training namespace's `val` split, `seed`'s draw; by
    default as many as pa-synth's privacy train split has) and tested on `test_clips` others
    (as many as its test split); `anonymize` maps float [B, 3, T, H, W] in [0, 1] to the same
    shape. `schedule` replaces the protocol's attacker schedule (a shorter budget for a quick
    look; a recipe check keeps the protocol's); `stage` names the attackers' progress bars."""
    train_clips, test_clips = train_clips or TRAIN_CLIPS, test_clips or TEST_CLIPS
    p, known = get_preset(preset), known_for(generator)
    pool = render_pool(preset, train_clips + test_clips, seed, split="val", generator=generator)
    out = np.empty_like(pool.videos)
    with torch.no_grad():
        for i in range(0, len(pool), batch):
            local = np.arange(i, min(i + batch, len(pool)))
            out[local] = as_frames(anonymize(as_tensor(pool, local, p.frames, device)))
    labels = pool.attributes
    assert labels is not None
    results = []
    for model in held_out_attackers(known):
        spec = FitSpec(model=model, task="multilabel", num_outputs=len(KNOWN_ATTRIBUTES),
                       clip_frames=p.frames, input_size=p.size,
                       schedule=schedule or known.schedule_for("attributes"),
                       augment=known.augment, seed=seed, device=device,
                       standardize=known.standardize)
        net, traces = fit(spec, out[:train_clips], labels[:train_clips], progress=progress,
                          stage=f"{stage} {model}")
        probs = predict(net, spec, out[train_clips:])
        cmap = privacy_scores(probs, labels[train_clips:], list(KNOWN_ATTRIBUTES)).cmap
        results.append((cmap, model, traces))
    cmap, model, traces = max(results, key=lambda r: r[0])
    chosen = next(t for t in traces if t.chosen)
    return HeldOutAttack(model, f"{known.id}@{known.version}", cmap, chosen.best_epoch,
                         len(chosen.val_loss), train_clips, test_clips, seed, traces,
                         {m: c for c, m, _ in results})


def select_snapshot(net: nn.Module, snapshots: list[dict], preset: str, *, seed: int,
                    device: str = "cpu", progress: Progress | None = None,
                    generator: int = GENERATOR_VERSION) -> list[dict[str, float]]:
    """Load into `net` the kept f_A that fresh `held_out_attack`ers of seed `seed` +
    SELECT_SEED_OFFSET find most private (the later on a tie), among those whose held-out
    top-1 is within SELECT_TOP1_DROP of the first snapshot's (f_A before the minimax, the
    reference only); the last when none is. `snapshots`: {"step", "val_top1", "weights"}
    each. Returns one row per candidate: step, val_top1, cmap (NaN: not probed), chosen."""
    floor = snapshots[0]["val_top1"] - SELECT_TOP1_DROP
    rows = []
    for snap in snapshots[1:]:
        cmap = float("nan")
        if snap["val_top1"] >= floor:
            net.load_state_dict(snap["weights"])
            cmap = held_out_attack(net.eval(), preset, seed=seed + SELECT_SEED_OFFSET,
                                   device=device, progress=progress, generator=generator,
                                   stage=f"selection probe, step {snap['step']}:").cmap
        rows.append({"step": float(snap["step"]), "val_top1": float(snap["val_top1"]),
                     "cmap": cmap})
    probed = [i for i, r in enumerate(rows) if not np.isnan(r["cmap"])]
    pick = (min(probed, key=lambda i: (rows[i]["cmap"], -i)) if probed else len(rows) - 1)
    for i, row in enumerate(rows):
        row["chosen"] = float(i == pick)
    net.load_state_dict(snapshots[1 + pick]["weights"])
    return rows
