"""Cost measurements `validate` records: peak memory of a call and FLOPs of one clip."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _TensorMemory(TorchDispatchMode):
    """Peak bytes of live tensors created during a call (CPU has no allocator statistics, and
    RSS misses memory glibc reuses). Storages are refcounted by the tensors that reference
    them, so views are not double counted; inputs, parameters and views of them are not."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            self.current -= self.sizes.pop(key)
            del self.refs[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr()
                  for t in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor) and t.device.type != "meta"}
        for t in torch.utils._pytree.tree_leaves(out):
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            key = t.untyped_storage().data_ptr()
            if key not in self.refs:
                # a view or alias of a storage that existed before the call (an input, a
                # weight, a constant: those count once, as weights)
                if t._is_view() or key in inputs:
                    continue
                self.refs[key] = 0
                self.sizes[key] = t.untyped_storage().nbytes()
                self.current += self.sizes[key]
                self.peak = max(self.peak, self.current)
            self.refs[key] += 1
            weakref.finalize(t, self._release, key)
        return out


@contextlib.contextmanager
def peak_memory_mb(device: str, result: list[float]) -> Iterator[None]:
    """Append the call's peak memory in MiB: CUDA allocator peak over the baseline, or on CPU
    the peak of live tensors created by the call (`_TensorMemory`)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        yield
        torch.cuda.synchronize()
        result.append((torch.cuda.max_memory_allocated() - base) / 2**20)
        return
    mode = _TensorMemory()
    with mode:
        yield
    result.append(mode.peak / 2**20)


def count_flops(module: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> int | None:
    """FLOPs of one clip as counted by torch's dispatcher-level counter; None if it cannot."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            module(x)
    except Exception:  # a counter failure must not fail a submission that otherwise runs
        return None
    return int(counter.get_total_flops())
