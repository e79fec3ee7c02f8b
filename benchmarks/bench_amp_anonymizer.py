"""f_A training under bf16 autocast against float32 at the papers' real-data scale: the real
recipes (R3D-18 f_T; SPAct's ResNet-50 NT-Xent f_B, VITA's ResNet-34 + MobileNet-V3 ensemble;
16x112x112 clips, batch 16) on a generated corpus in the real builders' format, short runs of
12 and 52 minimax steps, so the difference is the per-step cost without the pretraining.
Meant for a GPU (`--device cuda`); prints seconds, peak GPU memory and the bf16 ratio.

    python benchmarks/bench_amp_anonymizer.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

# the generated real-format corpus of the real-data training tests
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_learned_real import _images, _videos  # noqa: E402

from pabench.training.methods import default_recipe, train_anonymizer  # noqa: E402
from pabench.training.pools import real_source  # noqa: E402


def timed(method: str, source, steps: int, amp: str, device: str) -> tuple[float, float]:
    """Seconds and peak GPU memory (GiB) of one short training."""
    recipe = default_recipe(method, real=True).model_copy(update={
        "identity_steps": 3, "target_steps": 3, "steps": steps, "in_epochs": (),
        **({"ssl_steps": 3} if method == "spact" else {"budget_steps": 3})})
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    train_anonymizer(recipe, source, device=device, amp=amp)  # type: ignore[arg-type]
    if cuda:
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    return time.perf_counter() - t0, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp())
    _videos(root / "act", 40)
    _images(root / "priv", 60)
    source = real_source(root, "act", "priv", 16, 112)
    timed("vita", source, 3, "off", args.device)  # CUDA context and cuDNN autotuning
    for method in ("spact", "vita"):
        per_step = {}
        for amp in ("bf16", "off"):
            (short, _), (long, peak) = (timed(method, source, n, amp, args.device)
                                        for n in (12, 52))
            per_step[amp] = (long - short) / 40
            print(json.dumps({"method": method, "amp": amp, "s_12": round(short, 2),
                              "s_52": round(long, 2), "ms_per_step": round(1e3 * per_step[amp]),
                              "peak_gib": round(peak, 1)}), flush=True)
        print(f"{method}: bf16 autocast x{per_step['off'] / per_step['bf16']:.2f} per minimax "
              "step", flush=True)


if __name__ == "__main__":
    main()
