"""Training: fresh targets and attackers fitted to convergence (`fitting`, its inputs in
`augment`, standardized inputs in `standardize`), the training-only attackers (`attackers`),
the learned anonymizer baselines (`methods`, with their clips in `pools`, their curves in
`curves` and the held-out measure in `held_out`). The fitting names are re-exported here."""

from pabench.training.augment import memory_format
from pabench.training.fitting import (
    Amp,
    FitSpec,
    Task,
    Trace,
    autocast_dtype,
    build_for,
    clip_starts,
    fit,
    predict,
    prepare,
)
from pabench.training.standardize import (
    MIN_STD,
    FrameStandardized,
    Standardized,
    centre_stats,
    model_input,
    to_grey_levels,
)

__all__ = [
    "MIN_STD", "Amp", "FitSpec", "FrameStandardized", "Standardized", "Task", "Trace",
    "autocast_dtype", "build_for", "centre_stats", "clip_starts", "fit", "memory_format",
    "model_input", "predict", "prepare", "to_grey_levels",
]
