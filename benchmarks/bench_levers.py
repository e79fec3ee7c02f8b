"""Where a pa-synth evaluation's training time goes, and what each speed lever would buy.

    python benchmarks/bench_levers.py [--preset tiny] [--epochs 3] [--device cpu|cuda]
                                      [--models r3d_18 --frames 16 --size 112 --batch 16]

All numbers come from this one run on this machine, so the ratios compare like with like:
1. the machine's peak: fp32 and bf16 GEMM (2048^2) and a large 3x3 convolution, in GFLOP/s;
2. per model (every pa-synth target and attacker), one optimisation step (batch 32, AdamW) at
   the preset's clip shape: milliseconds and achieved GFLOP/s (FLOPs counted by
   torch.utils.flop_counter) under the current settings (all threads, NCHW, fp32) and under
   each lever: one thread (what two models side by side would each get), channels_last, bf16
   autocast, and channels_last + bf16; and three seeds trained as one vectorised ensemble
   (torch.func.stack_module_state + vmap), per model step, against three separate steps;
3. a real `fit` of each model on the preset's privacy/action training split for `--epochs`
   epochs: the share of time spent in the validation pass that early stopping needs, against
   the optimisation steps.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap
from torch.utils.flop_counter import FlopCounterMode

from pabench.data.clipset import load_clipset
from pabench.data.synth import build_synth, get_preset
from pabench.models import MODELS, build_model
from pabench.protocols import PROTOCOLS, Schedule
from pabench.training import FitSpec, fit

BATCH = Schedule().batch_size


DEVICE = "cpu"


def timed(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def peak_gflops() -> dict[str, float]:
    n = 8192 if DEVICE == "cuda" else 2048
    a, b = torch.rand(n, n, device=DEVICE), torch.rand(n, n, device=DEVICE)
    out = {"gemm fp32": 2 * n**3 / timed(lambda: a @ b, 5) / 1e9}
    a16, b16 = a.bfloat16(), b.bfloat16()
    out["gemm bf16"] = 2 * n**3 / timed(lambda: a16 @ b16, 5) / 1e9
    x, w = torch.rand(32, 64, 56, 56, device=DEVICE), torch.rand(64, 64, 3, 3, device=DEVICE)
    flops = 2 * 32 * 64 * 56 * 56 * 64 * 9
    out["conv3x3 fp32"] = flops / timed(lambda: F.conv2d(x, w, padding=1), 3) / 1e9
    return out


def _inputs(name: str, frames: int, size: int, k: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    video = MODELS.get(name).kind == "video"
    shape = (BATCH, 3, frames, size, size) if video else (BATCH, 3, size, size)
    return torch.rand(k, *shape, device=DEVICE), torch.randint(0, 8, (k, BATCH), device=DEVICE)


def step_fn(name: str, frames: int, size: int, channels_last: bool, bf16: bool
            ) -> tuple[Callable[[], None], int]:
    """One optimisation step of a fresh model, and its FLOPs (forward + backward)."""
    torch.manual_seed(0)
    model = build_model(name, 8, size).to(DEVICE)
    video = MODELS.get(name).kind == "video"
    x, y = (t[0] for t in _inputs(name, frames, size))
    if channels_last:
        fmt = torch.channels_last_3d if video else torch.channels_last
        model, x = model.to(memory_format=fmt), x.contiguous(memory_format=fmt)
    opt = torch.optim.AdamW(model.parameters(), 1e-3)

    def step() -> None:
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    counter = FlopCounterMode(display=False)
    with counter:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
    opt.zero_grad(set_to_none=True)
    return step, counter.get_total_flops()


def ensemble_step_fn(name: str, frames: int, size: int, k: int = 3) -> Callable[[], None]:
    """One step of `k` seeds as one vectorised model (each seed its own batch)."""
    nets = [build_model(name, 8, size).to(DEVICE) for _ in range(k)]
    params, buffers = stack_module_state(nets)  # type: ignore[arg-type]
    params = {n: p.detach().requires_grad_() for n, p in params.items()}
    base = copy.deepcopy(nets[0]).to("meta")
    opt = torch.optim.AdamW(params.values(), 1e-3)
    x, y = _inputs(name, frames, size, k)

    def one(p: dict, b: dict, xi: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, b), (xi,))

    def step() -> None:
        logits = vmap(one, randomness="different")(params, buffers, x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten()) * k
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def fit_profile(name: str, data: Path, preset: str, epochs: int) -> tuple[float, float]:
    """Seconds of a real fit and the seconds of it spent validating."""
    kind = MODELS.get(name).kind
    split = "synth-action" if kind == "video" else "synth-privacy"
    clips = load_clipset(data / split, "train", cache_dir=data / ".decoded")
    y = clips.action if kind == "video" else clips.attributes
    task = "multiclass" if kind == "video" else "multilabel"
    n_out = len(clips.action_classes) if kind == "video" else len(clips.attribute_names)
    p = get_preset(preset)
    spec = FitSpec(name, task, n_out, p.frames, p.size,  # type: ignore[arg-type]
                   Schedule(max_epochs=epochs, min_epochs=epochs, patience=epochs), ("shift",), 0,
                   device=DEVICE)
    from pabench.training import fitting  # here: bench_evaluate imports this module to count
    # FLOPs under older code trees too

    spent = [0.0]
    validate = fitting._validate

    def timed_validate(*args: object) -> tuple[float, float]:
        start = time.perf_counter()
        try:
            return validate(*args)  # type: ignore[arg-type]
        finally:
            spent[0] += time.perf_counter() - start

    fitting._validate = timed_validate  # type: ignore[assignment]
    try:
        start = time.perf_counter()
        fit(spec, clips.videos, y)
        return time.perf_counter() - start, spent[0]
    finally:
        fitting._validate = validate


def main() -> None:
    global DEVICE, BATCH
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--models", nargs="+", help="these models only, steps only (no real fit)")
    ap.add_argument("--frames", type=int, help="clip frames (default: the preset's)")
    ap.add_argument("--size", type=int, help="frame size (default: the preset's)")
    ap.add_argument("--batch", type=int, default=BATCH)
    args = ap.parse_args()
    DEVICE, BATCH = args.device, args.batch
    threads = torch.get_num_threads()
    p = get_preset(args.preset)
    p = type(p)(args.frames or p.frames, args.size or p.size, p.counts)
    where = torch.cuda.get_device_name() if DEVICE == "cuda" else f"{os.cpu_count()} CPUs"
    print(f"pa-synth {args.preset} clips ({p.frames}x{p.size}x{p.size}), batch {BATCH}, "
          f"{threads} threads, torch {torch.__version__}, {where}")
    peaks = peak_gflops()
    print("peak: " + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in peaks.items()))
    names = args.models or list(dict.fromkeys(
        m for _, spec in PROTOCOLS.items() if spec.benchmark == "pa-synth"
        for m in (spec.target, *spec.attackers)))
    variants = {"now": (threads, False, False), "channels_last": (threads, True, False),
                "bf16": (threads, False, True), "cl+bf16": (threads, True, True)}
    if DEVICE == "cpu":
        variants["1 thread"] = (1, False, False)
    print(f"\n{'model':20s} {'MFLOP/step':>10s} " + " ".join(f"{v:>16s}" for v in variants)
          + f" {'3 seeds vmap':>16s}   (ms per step, GFLOP/s; ratio = now / variant; vmap: "
          "3 separate steps / one step of the 3 seeds)")
    for name in names:
        cells, base = [], 0.0
        for n_threads, cl, bf16 in variants.values():
            torch.set_num_threads(n_threads)
            step, flops = step_fn(name, p.frames, p.size, cl, bf16)
            ms = timed(step, 5) * 1e3
            base = base or ms
            cells.append(f"{ms:6.1f} {flops / ms / 1e6:5.1f} x{base / ms:3.1f}")
        torch.set_num_threads(threads)
        try:
            ms = timed(ensemble_step_fn(name, p.frames, p.size), 5) * 1e3
            cells.append(f"{ms:6.1f} {3 * flops / ms / 1e6:5.1f} x{3 * base / ms:3.1f}")
        except RuntimeError as e:  # a layer vmap cannot batch
            cells.append(f"fails: {str(e)[:40]}")
        print(f"{name:20s} {flops / 1e6:10.1f} " + " ".join(f"{c:>16s}" for c in cells))
    if args.models:
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        build_synth(data, preset=args.preset, names=("synth-action", "synth-privacy"))
        print(f"\nreal fit, {args.epochs} epochs, {threads} threads:")
        print(f"{'model':20s} {'fit s':>7s} {'validation s':>13s} {'share':>6s}")
        for name in names:
            total, validation = fit_profile(name, data, args.preset, args.epochs)
            print(f"{name:20s} {total:7.1f} {validation:13.1f} {validation / total:6.1%}")


if __name__ == "__main__":
    main()
