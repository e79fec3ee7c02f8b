"""Training cost of every pa-synth target/attacker at the tiny and standard presets, in one run.

    python benchmarks/bench_model_cost.py [--threads 1] [--device cpu]

Prints, per model, the time of one optimisation step (batch 32) at each preset's clip shape,
the time of one epoch over the preset's action/privacy training split (frame models draw
`frames_per_epoch` frames per video), and the standard/tiny ratio. This is what decides the
`auto` preset: on CPU one standard epoch of the tiny3d target costs minutes.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from pabench.data.synth import PRESETS
from pabench.models import MODELS, build_model
from pabench.protocols import PROTOCOLS, Schedule
from pabench.training import FitSpec


def step_seconds(name: str, frames: int, size: int, device: str, batch: int) -> float:
    model = build_model(name, 8, size).to(device)
    video = MODELS.get(name).kind == "video"
    x = torch.rand(batch, 3, frames, size, size) if video else torch.rand(batch, 3, size, size)
    x, y = x.to(device), torch.randint(0, 8, (batch,), device=device)
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    for i in range(6):  # two warm-up steps, four timed
        if i == 2:
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / 4


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    batch = Schedule().batch_size
    reps = FitSpec.__dataclass_fields__["frames_per_epoch"].default
    names = dict.fromkeys(m for _, p in PROTOCOLS.items() if p.benchmark == "pa-synth"
                          for m in (p.target, *p.attackers))
    print(f"device {args.device}, {args.threads} thread(s), batch {batch}")
    print(f"{'model':20s} {'tiny step ms':>12s} {'std step ms':>12s} {'tiny epoch s':>13s} "
          f"{'std epoch s':>12s} {'std/tiny':>9s}")
    for name in names:
        frame = MODELS.get(name).kind == "frame"
        row = []
        for preset in ("tiny", "standard"):
            p = PRESETS[preset]
            n = p.counts["synth-action"]["train"] * (1 - Schedule().val_fraction)
            step = step_seconds(name, p.frames, p.size, args.device, batch)
            row += [step, step * n * (reps if frame else 1) / batch]
        print(f"{name:20s} {row[0] * 1e3:12.1f} {row[2] * 1e3:12.1f} {row[1]:13.1f} "
              f"{row[3]:12.1f} {row[3] / row[1]:9.1f}")


if __name__ == "__main__":
    main()
