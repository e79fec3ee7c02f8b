"""Wall time of a whole evaluation, sequential against models trained side by side, in one run.

    python benchmarks/bench_evaluate.py [--protocol known|all] [--preset auto|tiny|standard]
                                        [--device cpu] [--anonymizer baseline:downsample-4x]
                                        [--workers 1 0]

For each `--workers` value (1: one model at a time with every thread, the engine before
side-by-side training; 0: auto, one single-threaded process per core) the evaluation runs from a
fresh PABENCH_HOME (no cached fits or anonymized sets; pa-synth prebuilt there, not counted) and
the bench prints, per protocol, wall seconds, the stage table from the record's timings, CPU
seconds per wall second (this process and its workers), anonymizer calls per clip, and the
scores, so speed and attacker strength are compared in the same run on the same machine. The
wall time includes the raw (identity) reference, which later evaluations reuse from the cache.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

STAGES = ("validate", "anonymize", "train_side_by_side", "compute_train", "compute_predict",
          "score", "raw_reference")


def cpu_seconds() -> float:
    own, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                      resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(args: argparse.Namespace, workers: int) -> list[tuple]:
    home = Path(tempfile.mkdtemp(prefix=f"pabench-bench-w{workers}-"))
    os.environ["PABENCH_HOME"] = str(home)
    from pabench.data.synth import build_synth, resolve_preset
    from pabench.evaluation import evaluate
    from pabench.protocols import protocols_for

    preset = resolve_preset(args.preset, args.device)
    build_synth(home / "datasets" / f"pa-synth-{preset}", preset=preset)
    protocols = ([p.id for p in protocols_for("pa-synth")] if args.protocol == "all"
                 else [args.protocol])
    rows = []
    for pid in protocols:
        wall0, cpu0 = time.perf_counter(), cpu_seconds()
        rec = evaluate(args.anonymizer, pid, preset=preset, device=args.device, workers=workers)
        wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
        calls = rec.timings.get("anonymizer_calls", 0) / max(rec.timings["anonymized_clips"], 1)
        raw = rec.raw.privacy_cmap if rec.raw else float("nan")
        rows.append((pid, wall, cpu / wall, calls, rec.metrics.action,
                     rec.metrics.privacy_cmap, raw, rec.hardware, rec.timings))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="auto", help="auto: standard on a GPU, tiny on CPU")
    ap.add_argument("--protocol", default="all", help="a pa-synth protocol id, or all")
    ap.add_argument("--anonymizer", default="baseline:downsample-4x")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 0])
    args = ap.parse_args()
    results = {w: run(args, w) for w in args.workers}
    for w, rows in results.items():
        hw = rows[0][7]
        print(f"\nworkers={w} ({hw.get('workers', '1')} at once, {hw['threads']} thread(s) each)")
        print(f"{'protocol':26s} {'wall s':>7s} {'cpu/wall':>8s} {'calls/clip':>10s} "
              f"{'top-1':>6s} {'cMAP':>6s} {'raw cMAP':>8s}")
        for pid, wall, ratio, calls, top1, cmap, raw, _, _ in rows:
            print(f"{pid:26s} {wall:7.1f} {ratio:8.2f} {calls:10.2f} {top1:6.1f} {cmap:6.1f} "
                  f"{raw:8.1f}")
        total = sum(r[1] for r in rows)
        print(f"{'stage (s, summed)':26s} " + " ".join(f"{s:>18s}" for s in STAGES))
        sums = {s: sum(r[8].get(s, 0.0) for r in rows) for s in STAGES}
        print(f"{'':26s} " + " ".join(f"{sums[s]:8.1f} ({sums[s] / total:5.1%})" for s in STAGES))
        print(f"total wall {total:.1f} s")
    if len(results) > 1:
        walls = {w: sum(r[1] for r in rows) for w, rows in results.items()}
        first = args.workers[0]
        print("\nwall ratio vs workers=" + str(first) + ": " + ", ".join(
            f"workers={w} x{walls[first] / walls[w]:.2f}" for w in args.workers[1:]))


if __name__ == "__main__":
    main()
