"""Writing a module as a submission file, the way pabench itself loads them."""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Literal, cast

import torch
from torch.export import Dim

from pabench.errors import unknown_name
from pabench.io import atomic_write_bytes
from pabench.submission.core import JIT_DEPRECATION

ExportFormat = Literal["torch.export", "torchscript"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("torch.export", "torchscript")


def check_format(fmt: str) -> ExportFormat:
    """Refuse an unknown format before any work (a build or training may precede the export)."""
    if fmt not in EXPORT_FORMATS:
        raise unknown_name("export format", fmt, EXPORT_FORMATS)
    return cast(ExportFormat, fmt)


def export_submission(module: torch.nn.Module, path: Path, *, frames: int, size: int,
                      fmt: ExportFormat = "torch.export") -> Path:
    """Write `module` as a submission file with dynamic B/T/H/W, atomically.

    Named dims cover batch 1..1024, T 1..4096, H/W 8..8192. A module needing more (e.g. H a
    multiple of 16 for a downsampler) is re-exported with Dim.AUTO, letting torch.export infer
    the constraints; it may then specialise a dim, which `validate` reports against the protocol.
    The archive is serialized in memory, so its bytes (and sha256) do not depend on `path`.
    """
    check_format(fmt)
    module = module.eval()
    x = torch.rand(2, 3, frames, size, size, generator=torch.Generator().manual_seed(0))
    buf = io.BytesIO()
    if fmt == "torch.export":
        named = {0: Dim("batch", min=1, max=1024), 2: Dim("frames", min=1, max=4096),
                 3: Dim("height", min=8, max=8192), 4: Dim("width", min=8, max=8192)}
        auto = {i: Dim.AUTO for i in named}
        try:
            ep = torch.export.export(module, (x,), dynamic_shapes=(named,))
        except torch._dynamo.exc.UserError:
            ep = torch.export.export(module, (x,), dynamic_shapes=(auto,))
        torch.export.save(ep, buf)
    else:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=JIT_DEPRECATION)
            torch.jit.save(torch.jit.script(module), buf)
    return atomic_write_bytes(Path(path), buf.getvalue())
