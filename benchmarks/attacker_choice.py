"""Which attackers a pa-synth protocol should train: strength per FLOP.

For each candidate attacker prints how often it set the worst case in the committed records of
the ranked protocols of one version (`--version`, default 6), its forward FLOPs per training
sample (a frame for frame models, a clip for video models, counted by torch's FLOP counter), its
training FLOPs per epoch on the tiny preset's privacy training split, and, from a
`bench_convergence.py --json` file measured on held-out training clips, its best validation cMAP,
the epoch it came within 1 point of it, and the training FLOPs to reach that epoch:

    python benchmarks/bench_convergence.py --epochs 30 --data-version 3 --standardize \\
        --models tiny3d:action,tiny-slow3d,tiny-tsm,tiny-resnet2d,tiny2d,linear-probe \\
        --json conv.json
    python benchmarks/attacker_choice.py --convergence conv.json --data-version 3
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

RANKED = ("known", "cross-dataset", "novel")


def worst_case_share(results: Path, version: int) -> tuple[Counter[str], int]:
    """How many ranked records of `version` each attacker set the worst case in."""
    counts: Counter[str] = Counter()
    total = 0
    for path in sorted(results.glob("*.json")):
        doc = json.loads(path.read_text())
        protocol = doc.get("protocol", {})
        if protocol.get("id") in RANKED and protocol.get("version") == version:
            counts[doc["metrics"]["worst_attacker"]] += 1
            total += 1
    return counts, total


def forward_flops(model: str, frames: int, size: int) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from pabench.models import MODELS, build_model

    net = build_model(model, 5, size).eval()
    shape = (1, 3, size, size) if MODELS.get(model).kind == "frame" else (1, 3, frames, size, size)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        net(torch.rand(shape))
    return int(counter.get_total_flops())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--convergence", type=Path, help="bench_convergence.py --json output")
    ap.add_argument("--results", type=Path, default=Path("leaderboard/results"))
    ap.add_argument("--version", type=int, default=6, help="protocol version of the records")
    ap.add_argument("--data-version", type=int, default=3)
    ap.add_argument("--models", default="tiny2d,tiny-resnet2d,tiny-resnet2d-framestd,"
                    "tiny-slow3d,tiny-tsm,linear-probe")
    a = ap.parse_args()
    from pabench.data.synth import PRESETS
    from pabench.models import MODELS

    preset = PRESETS["tiny"]
    train = int(preset.split_counts(a.data_version)["synth-privacy"]["train"] * 0.85)
    counts, total = worst_case_share(a.results, a.version)
    conv = {}
    if a.convergence:
        conv = {r["model"]: r for r in json.loads(a.convergence.read_text())}
    print(f"{'attacker':24s} {'worst in':>9s} {'MFLOP/sample':>12s} {'GFLOP/epoch':>11s} "
          f"{'best val':>8s} {'plateau ep':>10s} {'GFLOP to plateau':>16s}")
    for model in a.models.split(","):
        kind = MODELS.get(model).kind
        fwd = forward_flops(model, preset.frames, preset.size)
        per_epoch = 3 * fwd * train * (min(4, preset.frames) if kind == "frame" else 1)
        r = conv.get(model)
        best = f"{r['best_score']:8.1f}" if r else f"{'':8s}"
        plateau = f"{r['score_plateau_epoch']:10d}" if r else f"{'':10s}"
        to_plateau = f"{per_epoch * r['score_plateau_epoch'] / 1e9:16.0f}" if r else ""
        print(f"{model:24s} {counts[model]:4d}/{total:<4d} {fwd / 1e6:12.2f} "
              f"{per_epoch / 1e9:11.2f} {best} {plateau} {to_plateau}")


if __name__ == "__main__":
    main()
