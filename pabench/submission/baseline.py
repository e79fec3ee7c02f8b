"""In-repo baselines as submissions: no file, so the hash is computed from the module."""

from __future__ import annotations

import hashlib

import torch

from pabench.submission.core import Submission
from pabench.submission.meta import SubmissionMeta


def from_module(
    name: str, module: torch.nn.Module, meta: SubmissionMeta | None = None
) -> Submission:
    """Wrap an in-repo baseline. The hash covers the name (which fixes a baseline's settings:
    downsample-2x and -4x share a class and have no weights), the class (module path
    included), its repr and weights, so it is stable across runs and distinct across
    configurations; it keys anonymized-data caches and records, so moving a baseline's class
    to another module changes it."""
    cls = f"{type(module).__module__}.{type(module).__qualname__}"
    h = hashlib.sha256(f"{name}|{cls}|{module!r}".encode())
    for key, t in sorted(module.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{key}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return Submission(name, None, h.hexdigest(), "baseline", module.eval(),
                      meta or SubmissionMeta(name=name))
