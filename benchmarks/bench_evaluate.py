"""Wall time of `evaluate --protocol all` vs the pure model compute inside it, in one run.

    python benchmarks/bench_evaluate.py [--preset auto|tiny|standard] [--device cpu]
                                        [--anonymizer baseline:downsample-4x]

Uses a fresh PABENCH_HOME (so no cached fits or anonymized sets) with pa-synth prebuilt there,
and prints: wall seconds, model-compute seconds (anonymizer forward passes + target/attacker
training and inference), their ratio, and anonymizer forward calls per clip.
Targets: wall <= 300 s on pa-synth standard, ratio <= 1.2, exactly 1 call per clip. The wall
time includes the raw (identity) reference, which later evaluations reuse from the cache.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="auto", help="auto: standard on a GPU, tiny on CPU")
    ap.add_argument("--anonymizer", default="baseline:downsample-4x")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="pabench-bench-"))
    os.environ["PABENCH_HOME"] = str(home)
    from pabench.data.synth import build_synth, resolve_preset
    from pabench.evaluation import evaluate
    from pabench.protocols import protocols_for

    args.preset = resolve_preset(args.preset, args.device)
    data = home / "datasets" / f"pa-synth-{args.preset}"
    t0 = time.perf_counter()
    build_synth(data, preset=args.preset)
    build_s = time.perf_counter() - t0
    wall = compute = calls = clips = 0.0
    rows = []
    for spec in protocols_for("pa-synth"):
        t0 = time.perf_counter()
        rec = evaluate(args.anonymizer, spec.id, preset=args.preset, output_dir=None,
                       device=args.device)
        w = time.perf_counter() - t0
        c = sum(rec.timings.get(k, 0.0) for k in ("anonymize", "compute_train",
                                                  "compute_predict"))
        wall, compute = wall + w, compute + c
        calls += rec.timings.get("anonymizer_calls", 0)
        clips += rec.timings.get("anonymized_clips", 0)
        rows.append((spec.id, w, c, rec.metrics.action_top1, rec.metrics.privacy_cmap))
    print(f"pa-synth {args.preset}: build {build_s:.1f} s (not counted below)")
    print(f"{'protocol':26s} {'wall s':>8s} {'compute s':>10s} {'top-1':>6s} {'cMAP':>6s}")
    for pid, w, c, a, p in rows:
        print(f"{pid:26s} {w:8.1f} {c:10.1f} {a:6.1f} {p:6.1f}")
    print(f"evaluate --protocol all: wall {wall:.1f} s, model compute {compute:.1f} s, "
          f"ratio {wall / compute:.3f}, anonymizer calls per clip {calls / max(clips, 1):.2f}")


if __name__ == "__main__":
    main()
