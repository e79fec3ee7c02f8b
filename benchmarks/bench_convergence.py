"""How long pa-synth's models need to converge on raw data: the evidence behind protocol v2's
schedule (min_epochs must cover the identity run's plateau) and its attacker strength floor.

Each model trains on the raw *training* split for the whole budget without early stopping; the
validation split is held out of that training data (no test clip is touched). Prints, per model,
the epoch of lowest validation loss, the first epoch within 1% of the final best score, and the
curve. Run one at a time on idle cores:

    python benchmarks/bench_convergence.py --epochs 40 [--models tiny2d,tiny-c3d] [--jobs 2]

A model may name schedule settings to try in place of v2's: `tiny-c3d@batch_size=8,lr=0.004`
(several models then separated by `;`). Recipes are chosen here, on held-out training clips,
never on a test split.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np


def _train(args: tuple) -> dict:
    model, target, epochs, preset, data_version, seed, standardize, overrides = args
    import torch

    torch.set_num_threads(1)
    from pabench.data.clipset import load_clipset
    from pabench.data.home import ensure_data
    from pabench.protocols import SYNTH_SCHEDULE
    from pabench.training import FitSpec, fit

    root = ensure_data("pa-synth", preset, None, None, data_version=data_version)
    name = "synth-action" if target == "action" else "synth-privacy"
    clips = load_clipset(root / name, "train")
    y = clips.action if target == "action" else clips.attributes
    sched = SYNTH_SCHEDULE.model_copy(update={"max_epochs": epochs, "min_epochs": epochs,
                                              "retry_lrs": (), **overrides})
    spec = FitSpec(model=model, task="multiclass" if target == "action" else "multilabel",
                   num_outputs=len(clips.action_classes) if target == "action"
                   else len(clips.attribute_names),
                   clip_frames=clips.videos.shape[1], input_size=clips.videos.shape[2],
                   schedule=sched, augment=("shift",), seed=seed, standardize=standardize)
    start = time.perf_counter()
    _, traces = fit(spec, clips.videos, y)
    t = traces[0]
    best = max(t.val_score)
    name = model + "".join(f" {k}={v}" for k, v in overrides.items())
    return {"model": name, "target": target, "seconds": time.perf_counter() - start,
            "best_loss_epoch": int(np.argmin(t.val_loss)) + 1,
            "score_plateau_epoch": next(i + 1 for i, v in enumerate(t.val_score)
                                        if v >= best - 1.0),
            "best_score": best, "val_score": t.val_score, "val_loss": t.val_loss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--models", default="tiny3d:action,tiny2d,tiny-resnet2d,tiny-c3d,"
                    "tiny2d-wide,shufflenet_v2_x0_5,tiny-vit2d")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--data-version", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--standardize", action="store_true",
                    help="inputs less their training mean image, as protocols v4 on train")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    tasks = []
    for item in a.models.split(";" if "@" in a.models else ","):
        head, _, extra = item.partition("@")
        model, _, target = head.partition(":")
        overrides = {k: json.loads(v) for k, v in (kv.split("=") for kv in extra.split(",") if kv)}
        tasks.append((model, target or "attributes", a.epochs, a.preset, a.data_version, a.seed,
                      a.standardize, overrides))
    # build the data once before the workers read it
    from pabench.data.home import ensure_data
    ensure_data("pa-synth", a.preset, None, None, data_version=a.data_version)
    with ProcessPoolExecutor(a.jobs) as pool:
        results = list(pool.map(_train, tasks))
    print(f"{'model':34s} {'target':10s} {'s':>6s} {'best-loss ep':>12s} "
          f"{'plateau ep':>10s} {'best val':>8s}")
    for r in results:
        print(f"{r['model']:34s} {r['target']:10s} {r['seconds']:6.0f} "
              f"{r['best_loss_epoch']:12d} {r['score_plateau_epoch']:10d} {r['best_score']:8.1f}")
    for r in results:
        curve = " ".join(f"{v:.0f}" for v in r["val_score"])
        print(f"{r['model']} val score by epoch: {curve}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
