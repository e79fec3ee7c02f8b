"""Held-out privacy of anonymizers by fresh `tiny-dense2d` attackers (`pabench.training.held_out`;
from protocol v5 on also one on frames standardized, the worse counts): the measure learned
recipes are tuned on, for any `baseline:NAME` or submission file.

    python benchmarks/held_out_attack.py baseline:downsample-4x baseline:vita my.pt2 ...

Prints per anonymizer the worse attacker's cMAP on held-out clips of the learned baselines'
training namespace (never a benchmark split), its best epoch and each attacker's cMAP. Run on
the reference baselines, it shows whether the measure orders anonymizers as the evaluation does
(docs/baselines.md).
"""

from __future__ import annotations

import argparse
import time

from pabench.anonymizers import BuildContext
from pabench.evaluation.run import resolve_submission
from pabench.training.held_out import held_out_attack


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("anonymizers", nargs="+", help="baseline:NAME or a submission file")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--seed", type=int, default=0, help="held-out clips and attacker seed")
    a = ap.parse_args()
    ctx = BuildContext(preset=a.preset)
    print(f"{'anonymizer':32s} {'held-out cMAP':>13s} {'best epoch':>10s} {'seconds':>8s} "
          f"{'fits as':>9s}  each attacker", flush=True)
    for spec in a.anonymizers:
        sub = resolve_submission(spec, ctx)
        start = time.perf_counter()
        r = held_out_attack(sub.module, ctx.preset, seed=a.seed)
        print(f"{spec:32s} {r.cmap:13.1f} {f'{r.best_epoch}/{r.epochs}':>10s} "
              f"{time.perf_counter() - start:8.0f} {r.protocol:>9s}  "
              + ", ".join(f"{m} {c:.1f}" for m, c in r.per_model.items()), flush=True)


if __name__ == "__main__":
    main()
