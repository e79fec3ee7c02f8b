"""Behavioural checks on the protocol's clip shape, and the costs they measure on the way."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from pabench.errors import PabenchError
from pabench.runtime import exact_float32
from pabench.submission.core import EXPORT_HINT, Submission
from pabench.submission.measure import count_flops, peak_memory_mb


@dataclass(frozen=True)
class Budgets:
    """Limits a submission must respect. They are the benchmark's, the same under every
    protocol (protocols carry none); `evaluate` takes others for experiments and tests."""

    max_seconds_per_clip: float = 2.0
    max_memory_mb_per_clip: float = 2048
    range_tolerance: float = 1e-3


DEFAULT_BUDGETS = Budgets()


@dataclass
class ValidationReport:
    """What `validate` measured, for the record: parameters, FLOPs of one clip (None when the
    counter fails), seconds per clip (best of two batch calls / batch), peak memory of a
    one-clip call in MiB, and the checks passed, in order."""

    params: int
    flops: int | None
    seconds_per_clip: float
    peak_memory_mb: float | None
    checks: list[str]


@exact_float32()
def validate(sub: Submission, *, frames: int, size: int, budgets: Budgets = DEFAULT_BUDGETS,
             batch: int = 2, device: str = "cpu", clips: torch.Tensor | None = None
             ) -> ValidationReport:
    """Run the behavioural checks on a deterministic random clip batch of the protocol's shape
    and, when given, determinism and batch independence again on benchmark `clips` (a
    submission may behave on real content as it does not on noise); the first failure is a
    PabenchError of one line naming the check."""
    shape = [batch, 3, frames, size, size]
    checks: list[str] = []

    def fail(check: str, problem: str) -> PabenchError:
        return PabenchError(f"validate: {problem} (check '{check}') for input {shape}")

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    spec = sub.input_spec
    if spec is not None:
        for wanted in (shape, [1, *shape[1:]]):
            if not spec.accepts(wanted):
                raise fail("input_spec", f"exported program takes input {spec} but the protocol "
                                         f"feeds {wanted}; {EXPORT_HINT}")

    def call(inp: torch.Tensor) -> torch.Tensor:
        try:
            with torch.no_grad():
                out = sub.module(inp)
        except Exception as e:  # whatever the submission raises is its failure, in one line
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            if spec is not None and "Guard failed" in msg:
                raise fail("input_spec", f"exported program ({spec}) refused input "
                                         f"{list(inp.shape)}: {msg}; {EXPORT_HINT}") from None
            raise fail("runs", f"forward raised {type(e).__name__}: {msg}") from None
        if not isinstance(out, torch.Tensor):
            raise fail("shape", f"forward returned {type(out).__name__}, not a tensor")
        return out

    weights_mb = _weights_mb(sub)
    if weights_mb > budgets.max_memory_mb_per_clip:
        raise fail("memory_budget", f"weights and constants take {weights_mb:.0f} MiB, over the "
                                    f"budget of {budgets.max_memory_mb_per_clip} MiB")
    x = torch.rand(shape, generator=torch.Generator().manual_seed(0)).to(device)
    _time_gate(call, x[:1], budgets.max_seconds_per_clip, fail, sync)
    timings = []
    outputs = []
    for _ in range(2):
        sync()
        start = time.perf_counter()
        outputs.append(call(x))
        sync()
        timings.append(time.perf_counter() - start)
    seconds = min(timings) / batch
    if seconds > budgets.max_seconds_per_clip:
        raise fail("time_budget", f"{seconds:.3g} s per clip exceeds the budget of "
                                  f"{budgets.max_seconds_per_clip} s")
    y = outputs[0]
    if spec is not None:
        checks.append("input_spec")
    if list(y.shape) != shape:
        raise fail("shape", f"output shape {list(y.shape)} differs from the input's")
    checks.append("shape")
    if y.dtype != torch.float32:
        raise fail("dtype", f"output dtype {y.dtype}, expected torch.float32")
    checks.append("dtype")
    if not torch.isfinite(y).all():
        kind = "NaN" if torch.isnan(y).any() else "inf"
        raise fail("finite", f"output has {kind} values")
    checks.append("finite")
    tol = budgets.range_tolerance
    lo, hi = float(y.min()), float(y.max())
    if lo < -tol or hi > 1 + tol:
        raise fail("range", f"output range [{lo:.4g}, {hi:.4g}] exceeds [0, 1] by more than {tol}")
    checks.append("range")
    memory: list[float] = []
    _repeatable(call, x, outputs, fail, checks, memory, device)
    if clips is not None:
        bench = clips.to(device)
        _repeatable(call, bench, [call(bench), call(bench)], fail, checks, [], device,
                    suffix="_on_benchmark_clips")
    checks.append("time_budget")
    if memory[0] + weights_mb > budgets.max_memory_mb_per_clip:
        raise fail("memory_budget", f"peak memory {memory[0]:.0f} MiB per clip and "
                                    f"{weights_mb:.0f} MiB of weights exceed the budget of "
                                    f"{budgets.max_memory_mb_per_clip} MiB")
    checks.append("memory_budget")
    params = sum(p.numel() for p in sub.module.parameters()) \
        if isinstance(sub.module, torch.nn.Module) else 0
    return ValidationReport(params, count_flops(sub.module, x[:1]), seconds, memory[0], checks)


def _weights_mb(sub: Submission) -> float:
    if sub.weight_bytes is not None:
        return sub.weight_bytes / 2**20
    if not isinstance(sub.module, torch.nn.Module):
        return 0.0
    tensors = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
               for t in sub.module.state_dict().values()}
    return sum(tensors.values()) / 2**20


def _time_gate(call: Callable[[torch.Tensor], torch.Tensor], clip: torch.Tensor, budget: float,
               fail: Callable[[str, str], PabenchError], sync: Callable[[], None]) -> None:
    """Stop a slow submission after one or two one-clip calls instead of after every check: a
    first call over twice the budget is refused at once (warm-up does not double a call), one
    over the budget gets a second, warm try."""
    seconds = []
    for _ in range(2):
        sync()
        start = time.perf_counter()
        call(clip)
        sync()
        seconds.append(time.perf_counter() - start)
        if min(seconds) <= budget:
            return
        if seconds[0] > 2 * budget:
            break
    raise fail("time_budget", f"{min(seconds):.3g} s for one clip exceeds the budget of "
                              f"{budget} s per clip")


# Batch independence forbids using other clips of a batch; it cannot ask for bitwise equality,
# since a GPU picks other kernels for another batch size: 2e-4 apart on an H100 for pa-synth's
# learned baselines with TF32 on (it is off now, `exact_float32`). Outputs are stored as uint8,
# so a gap under half a level cannot move a stored pixel by more than the rounding at a level's
# boundary.
HALF_LEVEL = 0.5 / 255


def _repeatable(call: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                outputs: list[torch.Tensor], fail: Callable[[str, str], PabenchError],
                checks: list[str], memory: list[float], device: str, suffix: str = "") -> None:
    """Determinism (two calls agree) and batch independence (each clip alone gives its output
    in the batch); the first one-clip call's peak memory goes to `memory`."""
    y = outputs[0]
    if not torch.allclose(outputs[1], y, rtol=1e-5, atol=1e-6):
        diff = float((outputs[1] - y).abs().max())
        raise fail("deterministic" + suffix,
                   f"two calls on the same input differ by up to {diff:.3g}")
    checks.append("deterministic" + suffix)
    for i in range(len(x)):
        sample = x[i : i + 1]
        with peak_memory_mb(device, memory) if i == 0 and not memory else contextlib.nullcontext():
            alone = call(sample)
        if not torch.allclose(alone[0], y[i], rtol=0, atol=HALF_LEVEL):
            diff = float((alone[0] - y[i]).abs().max())
            raise fail("batch_independent" + suffix,
                       f"sample {i} alone differs from its output in the batch by up to {diff:.3g}")
    checks.append("batch_independent" + suffix)
