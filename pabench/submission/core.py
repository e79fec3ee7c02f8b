"""What a loaded submission is, and the one-line failure every check of a file raises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import sympy
import torch
from torch.export import ExportedProgram

from pabench.errors import PabenchError
from pabench.submission.meta import SubmissionMeta

EXPORT_HINT = (
    "export with torch.export.export(model, (x,), dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO, "
    "3: Dim.AUTO, 4: Dim.AUTO},)) and torch.export.save, or pabench.submission.export_submission"
)
JIT_DEPRECATION = r"`torch\.jit\.\w+` is deprecated"
"""torch>=2.14 warns on every torch.jit call; TorchScript is still accepted, so it is silenced."""


def fail(path: Path, problem: str) -> PabenchError:
    return PabenchError(f"submission {path}: {problem}")


def reason(e: BaseException) -> str:
    """The first non-empty line of an exception, cut short: torch's messages run to pages."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0][:200]}" if lines else type(e).__name__


@dataclass(frozen=True)
class InputSpec:
    """Accepted (min, max) per input dim of an exported program; max None means unbounded."""

    ranges: tuple[tuple[int, int | None], ...]

    def accepts(self, shape: list[int]) -> bool:
        """Static dims must match and dynamic ones fit under their max. Lower bounds are left
        to the program's own guards: torch.export reports 2 for dims it assumed not to be 0/1,
        yet a Dim.AUTO program runs batch 1."""
        if len(shape) != len(self.ranges):
            return False
        return all(n == lo if lo == hi else hi is None or n <= hi
                   for n, (lo, hi) in zip(shape, self.ranges, strict=True))

    def __str__(self) -> str:
        parts = [str(lo) if lo == hi else f"{lo}..{'inf' if hi is None else hi}"
                 for lo, hi in self.ranges]
        return f"[{', '.join(parts)}]"

    @classmethod
    def of(cls, ep: ExportedProgram) -> InputSpec:
        """The ranges an exported program declares for its one tensor input."""
        from torch.utils._sympy.numbers import int_oo
        from torch.utils._sympy.value_ranges import bound_sympy

        user = set(ep.graph_signature.user_inputs)
        vals = [n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]
        if len(vals) != 1 or not isinstance(vals[0], torch.Tensor):
            raise PabenchError(f"forward must take exactly one tensor input, got {len(vals)} "
                               "inputs")
        ranges: list[tuple[int, int | None]] = []
        for d in vals[0].shape:
            if isinstance(d, int):
                ranges.append((d, d))
                continue
            vr = bound_sympy(d.node.expr, ep.range_constraints)
            hi = None if vr.upper in (sympy.oo, int_oo) else int(vr.upper)
            ranges.append((int(vr.lower), hi))
        return cls(tuple(ranges))


@dataclass
class Submission:
    """A loaded anonymizer; `module` maps float32 [B, 3, T, H, W] in [0, 1] to the same."""

    name: str
    path: Path | None
    sha256: str
    format: str  # "torch.export" | "torchscript" | "baseline"
    module: Callable[[torch.Tensor], torch.Tensor]
    meta: SubmissionMeta
    input_spec: InputSpec | None = field(default=None)  # torch.export only
    training_seed: int | None = None  # where pabench trained it (a learned baseline)
    replicas: tuple[Submission, ...] = ()
    """The same method trained with other seeds (a learned anonymizer's row is otherwise one
    training seed's draw): the evaluation's k-th seed (k >= 1) trains and tests its models on
    `replicas[k - 1]`'s output, so f_A's training variance enters the score and its CI."""

    weight_bytes: int | None = None
    """Bytes of the weights and constants a loaded file holds (None: count the module's): they
    count against the memory budget with the activations."""

    def for_seed(self, k: int) -> Submission:
        """The anonymizer behind the evaluation's k-th seed (counting from 0)."""
        return self if k == 0 or not self.replicas else self.replicas[k - 1]
