"""Writing a module as a submission file, the way pabench itself loads them, and saying which
clip shapes the written program really runs on."""

from __future__ import annotations

import io
import logging
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import torch
from torch.export import Dim, ExportedProgram

from pabench.errors import PabenchError, unknown_name
from pabench.io import atomic_write_bytes
from pabench.submission.core import JIT_DEPRECATION, InputSpec, fail, reason

log = logging.getLogger(__name__)

ExportFormat = Literal["torch.export", "torchscript"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("torch.export", "torchscript")

NAMED_RANGES = "batch 1..1024, frames 1..4096, height and width 8..8192"
# clip sizes the benchmark's protocols use (pa-synth tiny/standard, real) and their neighbours
PROBE_SIZES = (16, 24, 32, 40, 64, 112)
PROBE_FRAMES = (4, 8, 16)


def check_format(fmt: str) -> ExportFormat:
    """Refuse an unknown format before any work (a build or training may precede the export)."""
    if fmt not in EXPORT_FORMATS:
        raise unknown_name("export format", fmt, EXPORT_FORMATS)
    return cast(ExportFormat, fmt)


@dataclass(frozen=True)
class Probe:
    """Whether one clip (batch 1) runs, keeping its shape, at each probed height = width (at the
    export's frames) and each probed frame count (at the export's size). An exported program
    declares lower bounds only; its guards (a size multiple of 16, say) show when it runs."""

    sizes: dict[int, bool]
    frames: dict[int, bool]

    def __str__(self) -> str:
        def part(what: str, runs: dict[int, bool]) -> str:
            ok = [str(n) for n, good in runs.items() if good]
            bad = [str(n) for n, good in runs.items() if not good]
            return (f"{what} {', '.join(ok) or 'none'}"
                    + (f" (fails at {', '.join(bad)})" if bad else ""))

        return f"runs at {part('frames', self.frames)}; {part('height/width', self.sizes)}"

    @property
    def all_run(self) -> bool:
        return all(self.sizes.values()) and all(self.frames.values())


def probe(module: Callable[[torch.Tensor], torch.Tensor], *, frames: int, size: int,
          device: str = "cpu") -> Probe:
    """Run one grey clip per probed shape; the global RNG is left as it was (a module may draw
    noise), so probing changes no later number."""
    def runs(t: int, s: int) -> bool:
        x = torch.full((1, 3, t, s, s), 0.5, device=device)
        try:
            with torch.no_grad():
                y = module(x)
        except Exception:  # any failure at this shape (a guard, a size mismatch) is a "no"
            return False
        return isinstance(y, torch.Tensor) and y.shape == x.shape

    with torch.random.fork_rng(devices=[device] if device.startswith("cuda") else []):
        return Probe({s: runs(frames, s) for s in sorted({*PROBE_SIZES, size})},
                     {t: runs(t, size) for t in sorted({*PROBE_FRAMES, frames})})


def _export(module: torch.nn.Module, x: torch.Tensor, path: Path) -> tuple[ExportedProgram, str]:
    """The program with the named ranges, else with the shapes torch.export infers (Dim.AUTO;
    it may raise minimums or specialise a dim), and why the named ranges failed ("" if not)."""
    named = {0: Dim("batch", min=1, max=1024), 2: Dim("frames", min=1, max=4096),
             3: Dim("height", min=8, max=8192), 4: Dim("width", min=8, max=8192)}
    try:
        return torch.export.export(module, (x,), dynamic_shapes=(named,)), ""
    except torch._dynamo.exc.UserError as e:
        found = re.search(r"Constraints violated \(([^)]*)\)", str(e))
        why = f"the module constrains {found.group(1)}" if found else reason(e)
    except Exception as e:  # torch.export raises many types for a module it cannot trace
        raise _cannot(path, e) from e
    try:
        ep = torch.export.export(module, (x,), dynamic_shapes=({i: Dim.AUTO for i in named},))
    except Exception as e:
        raise _cannot(path, e) from e
    return ep, why


def _cannot(path: Path, e: Exception) -> PabenchError:
    return fail(path, f"cannot be exported with dynamic batch, frames, height and width "
                      f"({reason(e)}); torch.export.draft_export(module, (x,)) lists every "
                      "problem")


def export_submission(module: torch.nn.Module, path: Path, *, frames: int, size: int,
                      fmt: ExportFormat = "torch.export") -> Path:
    """Write `module` as a submission file with dynamic B/T/H/W, atomically, and log what was
    written: the input spec and the probed clip shapes it runs on (a warning when the named
    ranges could not be kept or a probed shape fails).

    Named dims cover batch 1..1024, T 1..4096, H/W 8..8192. A module needing more (e.g. H a
    multiple of 16 for a downsampler) is re-exported with Dim.AUTO, letting torch.export infer
    the constraints; `validate` then refuses a protocol's clip shape the program's guards
    reject. The archive is serialized in memory, so its bytes (and sha256) do not depend on
    `path`."""
    check_format(fmt)
    module = module.eval()
    x = torch.rand(2, 3, frames, size, size, generator=torch.Generator().manual_seed(0))
    buf = io.BytesIO()
    why = ""
    program: Callable[[torch.Tensor], torch.Tensor]
    if fmt == "torch.export":
        ep, why = _export(module, x, Path(path))
        torch.export.save(ep, buf)
        program, spec = ep.module(), f"input {InputSpec.of(ep)}"
    else:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=JIT_DEPRECATION)
            try:
                program = torch.jit.script(module)
            except Exception as e:  # TorchScript raises RuntimeErrors with pages of source
                raise fail(Path(path), f"cannot be scripted ({reason(e)})") from e
            torch.jit.save(program, buf)
        spec = "TorchScript (no declared input spec)"
    written = atomic_write_bytes(Path(path), buf.getvalue())
    probed = probe(program, frames=frames, size=size)
    fallback = (f"the named ranges ({NAMED_RANGES}) failed ({why}), so torch.export inferred "
                "the shapes: " if why else "")
    level = logging.WARNING if why or not probed.all_run else logging.INFO
    log.log(level, "exported %s: %s%s; %s", written, fallback, spec, probed)
    return written
