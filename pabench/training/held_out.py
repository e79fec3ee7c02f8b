"""Held-out privacy by a fresh attacker: the measure learned recipes are tuned on.

The curves' `val_cmap` scores f_A against the attackers it trains against, which are weak by
design (short budgets, restarts): VITA's recipe reads 68 there and 90 in the evaluation. Tuning
on it rewards fooling those opponents, not hiding the attributes. This measure does what an
evaluation does, without reading a benchmark split: a fresh attacker of an architecture that
neither trains f_A nor scores any protocol (`tiny-dense2d`) learns the known attributes to
convergence, as the newest `known` protocol trains its attackers (schedule, augmentation and,
from v4, standardized inputs: a recipe must not be tuned towards blinding the attacker), from
f_A's output of held-out clips of the training namespace, and is scored on other held-out
clips of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from pabench.data.clipset import as_frames
from pabench.data.synth import KNOWN_ATTRIBUTES, get_preset
from pabench.metrics import privacy_scores
from pabench.protocols import NEXT, get_protocol
from pabench.runtime import Progress
from pabench.training import FitSpec, Trace, fit, predict
from pabench.training.attackers import HELD_OUT_ATTACKER
from pabench.training.pools import as_tensor, render_pool

TRAIN_CLIPS, TEST_CLIPS = 720, 200  # the size of pa-synth's privacy train and test splits


@dataclass(frozen=True)
class HeldOutAttack:
    """The fresh attacker's held-out cMAP (%), its chosen trace, what it saw and the protocol
    (`ID@VERSION`) whose fits it trains as: numbers of different versions do not compare."""

    model: str
    protocol: str
    cmap: float
    best_epoch: int
    epochs: int
    train_clips: int
    test_clips: int
    seed: int
    traces: list[Trace]


def held_out_attack(anonymize: Callable[[torch.Tensor], torch.Tensor], preset: str, *,
                    seed: int = 0, train_clips: int | None = None,
                    test_clips: int | None = None, device: str = "cpu", batch: int = 32,
                    progress: Progress | None = None) -> HeldOutAttack:
    """cMAP of a fresh `tiny-dense2d` trained on `anonymize`'s output of `train_clips` held-out
    clips (the training namespace's `val` split, `seed`'s draw; by default as many as
    pa-synth's privacy train split has) and tested on `test_clips` others (as many as its test
    split); `anonymize` maps float [B, 3, T, H, W] in [0, 1] to the same shape."""
    train_clips, test_clips = train_clips or TRAIN_CLIPS, test_clips or TEST_CLIPS
    p, known = get_preset(preset), NEXT.get("known", get_protocol("known"))
    pool = render_pool(preset, train_clips + test_clips, seed, split="val")
    out = np.empty_like(pool.videos)
    with torch.no_grad():
        for i in range(0, len(pool), batch):
            local = np.arange(i, min(i + batch, len(pool)))
            out[local] = as_frames(anonymize(as_tensor(pool, local, p.frames, device)))
    labels = pool.attributes
    assert labels is not None
    spec = FitSpec(model=HELD_OUT_ATTACKER, task="multilabel", num_outputs=len(KNOWN_ATTRIBUTES),
                   clip_frames=p.frames, input_size=p.size, schedule=known.schedule,
                   augment=known.augment, seed=seed, device=device,
                   standardize=known.standardize)
    net, traces = fit(spec, out[:train_clips], labels[:train_clips], progress=progress,
                      stage=f"held-out attacker {HELD_OUT_ATTACKER}")
    probs = predict(net, spec, out[train_clips:])
    scores = privacy_scores(probs, labels[train_clips:], list(KNOWN_ATTRIBUTES))
    chosen = next(t for t in traces if t.chosen)
    return HeldOutAttack(HELD_OUT_ATTACKER, f"{known.id}@{known.version}", scores.cmap,
                         chosen.best_epoch, len(chosen.val_loss), train_clips, test_clips, seed,
                         traces)
