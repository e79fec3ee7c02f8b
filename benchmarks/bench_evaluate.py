"""Wall time of whole evaluations: engines (code trees) and `--workers` settings, in one run.

    python benchmarks/bench_evaluate.py [--protocol known|all] [--preset auto|tiny|standard]
                                        [--device cpu|cuda] [--anonymizer baseline:identity]
                                        [--workers 1 0] [--code . OLD_CHECKOUT ...]

For each code tree (`--code`: this checkout by default; give a `git worktree` of an older commit
beside it to compare engines) and each `--workers` value (1: one model at a time; 0: auto, one
process per core on CPU; N: N processes side by side, sharing the cores or the GPU) the
evaluation runs in a fresh interpreter with that tree first on `PYTHONPATH` and a fresh
PABENCH_HOME (no cached fits or anonymized sets; pa-synth prebuilt there, not counted). The bench
prints, per protocol, wall seconds, CPU seconds per wall second (the child and its workers),
anonymizer calls per clip, the scores and the raw reference's per-attacker cMAP (so speed and
attacker strength are compared in the same run on the same machine), and the stage table from
the record's timings. The wall time includes the raw (identity) reference, which later
evaluations reuse from the cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = ("validate", "anonymize", "train_side_by_side", "worker_start", "compute_train",
          "compute_predict", "score", "raw_reference", "consistency")


def cpu_seconds() -> float:
    """CPU seconds of this process and its children, the living ones included: the worker
    pool outlives an evaluation, and RUSAGE_CHILDREN counts a child only once it has exited."""
    own, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                      resource.RUSAGE_CHILDREN))
    tick, me, live = os.sysconf("SC_CLK_TCK"), os.getpid(), 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # from field 3, the state
        except OSError:  # exited meanwhile
            continue
        if int(fields[1]) == me:
            live += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + live


def child(args: argparse.Namespace) -> None:
    """One engine, one workers setting: evaluate every protocol, print one JSON row each."""
    from pabench.evaluation import evaluate
    from pabench.protocols import protocols_for

    protocols = ([p.id for p in protocols_for("pa-synth")] if args.protocol == "all"
                 else [args.protocol])
    for pid in protocols:
        wall0, cpu0 = time.perf_counter(), cpu_seconds()
        rec = evaluate(args.anonymizer, pid, preset=args.preset, device=args.device,
                       workers=args.workers[0])
        wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
        raw = rec.raw.privacy_cmap if rec.raw else float("nan")
        print(json.dumps({
            "protocol": pid, "wall": wall, "cpu_per_wall": cpu / wall,
            "calls": rec.timings.get("anonymizer_calls", 0)
            / max(rec.timings.get("anonymized_clips", 1), 1),
            "top1": rec.metrics.action, "cmap": rec.metrics.privacy_cmap, "raw": raw,
            "raw_attackers": {a.arch: a.cmap for a in rec.raw_attackers or []},
            "hardware": rec.hardware, "timings": rec.timings}), flush=True)


def run(args: argparse.Namespace, code: Path, workers: int, data: Path) -> list[dict]:
    home = Path(tempfile.mkdtemp(prefix=f"pabench-bench-w{workers}-"))
    shutil.copytree(data, home / "datasets")
    env = {**os.environ, "PABENCH_HOME": str(home),
           "PYTHONPATH": os.pathsep.join([str(code.resolve()), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, __file__, "--child", "--protocol", args.protocol, "--preset",
           args.preset, "--anonymizer", args.anonymizer, "--device", args.device,
           "--workers", str(workers)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    shutil.rmtree(home, ignore_errors=True)
    if out.returncode != 0:
        sys.exit(f"{code} workers={workers} failed:\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def report(name: str, rows: list[dict]) -> float:
    hw = rows[0]["hardware"]
    print(f"\n{name} ({hw.get('workers', '1')} at once, {hw['threads']} thread(s) each, "
          f"{hw.get('gpu', hw['device'])})")
    print(f"{'protocol':26s} {'wall s':>7s} {'cpu/wall':>8s} {'calls/clip':>10s} "
          f"{'top-1':>6s} {'cMAP':>6s} {'raw cMAP':>8s}  raw cMAP per attacker")
    for r in rows:
        per = ", ".join(f"{k} {v:.1f}" for k, v in r["raw_attackers"].items())
        print(f"{r['protocol']:26s} {r['wall']:7.1f} {r['cpu_per_wall']:8.2f} {r['calls']:10.2f} "
              f"{r['top1']:6.1f} {r['cmap']:6.1f} {r['raw']:8.1f}  {per}")
    total = sum(r["wall"] for r in rows)
    sums = {s: sum(r["timings"].get(s, 0.0) for r in rows) for s in STAGES}
    print("stage (s summed over protocols; worker_start and compute_train sum the workers' "
          "seconds):")
    for s in STAGES:
        if sums[s]:
            print(f"  {s:22s} {sums[s]:8.1f}  {sums[s] / total:6.1%} of wall")
    print(f"total wall {total:.1f} s")
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny", help="auto: standard on a GPU, tiny on CPU")
    ap.add_argument("--protocol", default="known", help="a pa-synth protocol id, or all")
    ap.add_argument("--anonymizer", default="baseline:identity")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int, nargs="+", default=[0])
    ap.add_argument("--code", type=Path, nargs="+", default=[Path(__file__).parent.parent])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    from pabench.data.synth import build_synth, resolve_preset
    from pabench.evaluation.data import synth_dir

    args.preset = resolve_preset(args.preset, args.device)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PABENCH_HOME"] = tmp
        build_synth(synth_dir(args.preset), preset=args.preset)
        walls = {}
        for code in args.code:
            for w in args.workers:
                name = f"code={code} workers={w}"
                walls[name] = report(name, run(args, code, w, Path(tmp) / "datasets"))
    first = next(iter(walls))
    print(f"\nwall ratio vs {first}: " + ", ".join(f"{n} x{walls[first] / t:.2f}"
                                                  for n, t in list(walls.items())[1:]))


if __name__ == "__main__":
    main()
