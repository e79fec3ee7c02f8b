"""The torch runtime: rank and world under torchrun, DDP, devices, float32 numerics and the
hardware a run used. torch is imported by the functions that use it; the torch-free plumbing
is `pabench.io`."""

from __future__ import annotations

import atexit
import contextlib
import os
import platform
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pabench.errors import PabenchError
from pabench.io import cpu_model

if TYPE_CHECKING:
    from torch import nn


def is_distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def rank_world() -> tuple[int, int]:
    """(rank, world size) under torchrun, (0, 1) otherwise."""
    import torch.distributed as dist

    if is_distributed():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_rank0() -> bool:
    return rank_world()[0] == 0


def barrier() -> None:
    import torch.distributed as dist

    if is_distributed():
        dist.barrier()


def _shutdown_distributed() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def init_distributed(device: str) -> str:
    """Under torchrun, join the process group (gloo on CPU, NCCL on GPU); each rank then takes
    its local GPU. Returns the device this rank should use."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
        # Gloo's worker threads abort the process (SIGABRT) if the group is still alive while
        # the interpreter shuts down; tear it down while Python is intact.
        atexit.register(_shutdown_distributed)
    if dist.is_initialized() and device == "cuda":
        device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
    return device


def wrap_ddp(model: nn.Module, device: str) -> nn.Module:
    """DDP under torchrun (rank 0's initial weights are broadcast), the model itself otherwise."""
    import torch
    from torch import nn

    if not is_distributed():
        return model
    ids = [torch.device(device).index] if device.startswith("cuda") else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids)


def check_device(device: str) -> str:
    """Refuse an unusable device up front, in one line, before any data is built."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise PabenchError(f"--device {device!r}: not a torch device (cpu, cuda, cuda:1, ...)"
                           ) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise PabenchError(f"--device {device}: no CUDA GPU is visible here; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise PabenchError(f"--device {device}: only {torch.cuda.device_count()} GPU(s) "
                               "are visible")
    elif dev.type != "cpu":
        raise PabenchError(f"--device {device}: only cpu and cuda devices are supported")
    return device


# The float32 precision anonymizers run under on GPUs (`exact_float32`); it moves their
# outputs, so the anonymized-clip cache key carries it.
ANONYMIZER_FLOAT32 = "ieee"


@contextlib.contextmanager
def exact_float32() -> Iterator[None]:
    """Run an anonymizer with TF32 off on GPUs. A TF32 convolution keeps 10 mantissa bits and
    a GPU picks other kernels for another batch size, so a thresholded output (a segmenter's
    mask) flipped pixels between a clip alone and in its batch on an H200, and GPU outputs
    drift from CPU ones; the anonymizer's share of an evaluation's compute is small."""
    import torch

    conv, matmul = torch.backends.cudnn.conv, torch.backends.cuda.matmul
    saved = conv.fp32_precision, matmul.fp32_precision
    conv.fp32_precision = matmul.fp32_precision = ANONYMIZER_FLOAT32
    try:
        yield
    finally:
        conv.fp32_precision, matmul.fp32_precision = saved


def numerics(device: str, threads: int | None = None) -> tuple[str, int | None, int]:
    """Where a training computes, for cache keys: device type, CPU threads (`threads`, else
    this process's) and DDP world size. Each changes kernels or reduction order, so the
    weights' last bits, which training then amplifies."""
    import torch

    kind = torch.device(device).type
    return kind, (threads or torch.get_num_threads()) if kind == "cpu" else None, rank_world()[1]


def hardware_info(device: str, threads: int | None = None, workers: int = 1) -> dict[str, str]:
    """Where a record was computed; `threads` per model (numbers depend on it), `workers`
    models trained at once."""
    import torch

    info = {"platform": platform.platform(), "cpu": cpu_model(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_count": str(os.cpu_count()), "torch": str(torch.__version__), "device": device,
            "threads": str(threads or torch.get_num_threads())}
    if workers > 1:
        info["workers"] = str(workers)
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    if is_distributed():
        info["world_size"] = str(rank_world()[1])
    return info
