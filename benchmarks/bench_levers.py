"""Where a pa-synth evaluation's training time goes, and what each speed lever would buy.

    python benchmarks/bench_levers.py [--preset tiny] [--epochs 3]

All numbers come from this one run on this machine, so the ratios compare like with like:
1. the machine's peak: fp32 and bf16 GEMM (2048^2) and a large 3x3 convolution, in GFLOP/s;
2. per model (every pa-synth target and attacker), one optimisation step (batch 32, AdamW) at
   the preset's clip shape: milliseconds and achieved GFLOP/s (FLOPs counted by
   torch.utils.flop_counter) under the current settings (all threads, NCHW, fp32) and under
   each lever: one thread (what two models side by side would each get), channels_last, bf16
   autocast, and channels_last + bf16;
3. a real `fit` of each model on the preset's privacy/action training split for `--epochs`
   epochs: the share of time spent in the validation pass that early stopping needs, against
   the optimisation steps.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import pabench.training as training
from pabench.data.clipset import load_clipset
from pabench.data.synth import build_synth, get_preset
from pabench.models import MODELS, build_model
from pabench.protocols import PROTOCOLS, Schedule
from pabench.training import FitSpec, fit

BATCH = Schedule().batch_size


def timed(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def peak_gflops() -> dict[str, float]:
    a, b = torch.rand(2048, 2048), torch.rand(2048, 2048)
    out = {"gemm fp32": 2 * 2048**3 / timed(lambda: a @ b, 5) / 1e9}
    a16, b16 = a.bfloat16(), b.bfloat16()
    out["gemm bf16"] = 2 * 2048**3 / timed(lambda: a16 @ b16, 5) / 1e9
    x, w = torch.rand(32, 64, 56, 56), torch.rand(64, 64, 3, 3)
    flops = 2 * 32 * 64 * 56 * 56 * 64 * 9
    out["conv3x3 fp32"] = flops / timed(lambda: F.conv2d(x, w, padding=1), 3) / 1e9
    return out


def step_fn(name: str, frames: int, size: int, channels_last: bool, bf16: bool
            ) -> tuple[Callable[[], None], int]:
    """One optimisation step of a fresh model, and its FLOPs (forward + backward)."""
    torch.manual_seed(0)
    model = build_model(name, 8, size)
    video = MODELS.get(name).kind == "video"
    x = torch.rand(BATCH, 3, frames, size, size) if video else torch.rand(BATCH, 3, size, size)
    if channels_last:
        fmt = torch.channels_last_3d if video else torch.channels_last
        model, x = model.to(memory_format=fmt), x.contiguous(memory_format=fmt)
    y = torch.randint(0, 8, (BATCH,))
    opt = torch.optim.AdamW(model.parameters(), 1e-3)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    counter = FlopCounterMode(display=False)
    with counter:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
    opt.zero_grad(set_to_none=True)
    return step, counter.get_total_flops()


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
                   Schedule(max_epochs=epochs, min_epochs=epochs, patience=epochs), ("shift",), 0)
    spent = [0.0]
    score = training._score

    def timed_score(*args: object) -> float:
        start = time.perf_counter()
        try:
            return score(*args)  # type: ignore[arg-type]
        finally:
            spent[0] += time.perf_counter() - start

    training._score = timed_score  # type: ignore[assignment]
    try:
        start = time.perf_counter()
        fit(spec, clips.videos, y)
        return time.perf_counter() - start, spent[0]
    finally:
        training._score = score


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    threads = torch.get_num_threads()
    p = get_preset(args.preset)
    print(f"pa-synth {args.preset} ({p.frames}x{p.size}x{p.size}), batch {BATCH}, "
          f"{threads} threads, torch {torch.__version__}, {os.cpu_count()} CPUs")
    peaks = peak_gflops()
    print("peak: " + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in peaks.items()))
    names = list(dict.fromkeys(m for _, spec in PROTOCOLS.items() if spec.benchmark == "pa-synth"
                               for m in (spec.target, *spec.attackers)))
    variants = {"now": (threads, False, False), "1 thread": (1, False, False),
                "channels_last": (threads, True, False), "bf16": (threads, False, True),
                "cl+bf16": (threads, True, True)}
    print(f"\n{'model':20s} {'MFLOP/step':>10s} " + " ".join(f"{v:>16s}" for v in variants)
          + "   (ms per step, GFLOP/s; ratio = now / variant)")
    for name in names:
        cells, base = [], 0.0
        for n_threads, cl, bf16 in variants.values():
            torch.set_num_threads(n_threads)
            step, flops = step_fn(name, p.frames, p.size, cl, bf16)
            ms = timed(step, 5) * 1e3
            base = base or ms
            cells.append(f"{ms:6.1f} {flops / ms / 1e6:5.1f} x{base / ms:3.1f}")
        torch.set_num_threads(threads)
        print(f"{name:20s} {flops / 1e6:10.1f} " + " ".join(f"{c:>16s}" for c in cells))
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
