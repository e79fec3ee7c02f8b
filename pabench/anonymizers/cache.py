"""Trained parts of in-repo baselines (the learned f_A, the pa-synth segmenter), cached on disk.

Each is a deterministic function of its recipe, so the cache is pure: a missing, truncated or
outdated file is trained over, never an error. Files are read with `weights_only=True` (no
unpickling of code) and written atomically by rank 0 alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

from pabench.io import atomic_write, pabench_home
from pabench.runtime import barrier, is_rank0

T = TypeVar("T")
log = logging.getLogger("pabench")


def models_dir(cache_dir: Path | None) -> Path:
    """Where trained parts live unless a caller picks a folder."""
    return cache_dir if cache_dir is not None else pabench_home() / "models"


def load_or_train(path: Path, *, restore: Callable[[object], T], train: Callable[[], T],
                  state: Callable[[T], object], what: str) -> T:
    """`restore(payload)` of the file at `path`, else `train()` and cache `state(result)`.

    Every rank trains (learned baselines train with DDP, and all ranks need the result); rank 0
    writes the file and every rank waits for it, so all go on with the cache in place.
    """
    if path.is_file():
        try:
            return restore(torch.load(path, map_location="cpu", weights_only=True))
        except Exception as e:  # torch.load and load_state_dict raise many types on bad files
            log.warning("%s: unreadable cache (%s), training it again", path, type(e).__name__)
    if is_rank0():
        log.info("training %s (first use; cached in %s)", what, path)
    result = train()
    if is_rank0():
        atomic_write(path, lambda tmp: torch.save(state(result), tmp))
    barrier()
    return result
