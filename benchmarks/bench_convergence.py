"""How long pa-synth's models need to converge on raw data: the evidence behind protocol v2's
schedule (min_epochs must cover the identity run's plateau) and its attacker strength floor.

Each model trains on the raw *training* split for the whole budget without early stopping; the
validation split is held out of that training data (no test clip is touched). Prints, per model,
the epoch of lowest validation loss, the first epoch within 1% of the final best score, and the
curve. Run one at a time on idle cores:

    python benchmarks/bench_convergence.py --epochs 40 [--models tiny2d,tiny-c3d] [--jobs 2]

A model may name schedule settings to try in place of v2's: `tiny-c3d@batch_size=8,lr=0.004`
(several models then separated by `;`). Recipes are chosen here, on held-out training clips,
never on a test split. `--anonymizer baseline:NAME` trains on the training clips as that
baseline outputs them (anonymized once, before the models train):

    python benchmarks/bench_convergence.py --epochs 24 --data-version 4 --standardize \
        --anonymizer baseline:downsample-4x --models tiny-resnet2d,tiny-slow3d
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np


def _train(args: tuple) -> dict:
    model, target, epochs, preset, data_version, seed, standardize, overrides, anonymized = args
    import torch

    torch.set_num_threads(1)
    from pabench.data.clipset import load_clipset
    from pabench.data.home import ensure_data
    from pabench.protocols import SYNTH_SCHEDULE
    from pabench.training import FitSpec, fit

    root = ensure_data("pa-synth", preset, None, None, data_version=data_version)
    name = "synth-action" if target == "action" else "synth-privacy"
    clips = load_clipset(root / name, "train")
    if anonymized:
        clips = clips.with_videos(np.load(anonymized, mmap_mode="r"), "anonymized")
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
    return {"model": name, "target": target, "anonymized": bool(anonymized),
            "seconds": time.perf_counter() - start,
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
    ap.add_argument("--anonymizer", help="baseline:NAME whose output of the clips they train on")
    a = ap.parse_args()
    # build the data once before the workers read it
    from pabench.data.home import ensure_data
    root = ensure_data("pa-synth", a.preset, None, None, data_version=a.data_version)
    with tempfile.TemporaryDirectory() as tmp:
        anonymized = {}
        if a.anonymizer:
            targets = {item.partition("@")[0].partition(":")[2] for item in _items(a)}
            for name in {"synth-action" if t == "action" else "synth-privacy" for t in targets}:
                anonymized[name] = _anonymize(a.anonymizer, root / name, a.preset,
                                              a.data_version, Path(tmp) / f"{name}.npy")
        results = _run(a, anonymized)
    _report(a, results)


def _anonymize(spec: str, root: Path, preset: str, data_version: int, out: Path) -> str:
    """The training clips of the clip set at `root` as baseline `spec` outputs them, saved to
    `out` for the workers to map."""
    import torch

    from pabench.anonymizers import BuildContext
    from pabench.data.clipset import as_frames, load_clipset
    from pabench.evaluation.run import resolve_submission

    sub = resolve_submission(spec, BuildContext(preset=preset, data_version=data_version))
    videos = load_clipset(root, "train").videos  # [N, T, H, W, C] uint8
    done = np.empty_like(videos)
    with torch.no_grad():
        for i in range(0, len(videos), 64):
            x = torch.from_numpy(np.array(videos[i:i + 64]))
            y = sub.module(x.permute(0, 4, 1, 2, 3).float().div(255))
            done[i:i + 64] = as_frames(y)
    np.save(out, done)
    return str(out)


def _items(a: argparse.Namespace) -> list[str]:
    return a.models.split(";" if "@" in a.models else ",")


def _run(a: argparse.Namespace, anonymized: dict[str, str]) -> list[dict]:
    tasks = []
    for item in _items(a):
        head, _, extra = item.partition("@")
        model, _, target = head.partition(":")
        overrides = {k: json.loads(v) for k, v in (kv.split("=") for kv in extra.split(",") if kv)}
        name = "synth-action" if target == "action" else "synth-privacy"
        tasks.append((model, target or "attributes", a.epochs, a.preset, a.data_version, a.seed,
                      a.standardize, overrides, anonymized.get(name)))
    with ProcessPoolExecutor(a.jobs) as pool:
        return list(pool.map(_train, tasks))


def _report(a: argparse.Namespace, results: list[dict]) -> None:
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
