"""Wall time of whole evaluations: engines (code trees) and `--workers` settings, in one run.

    python benchmarks/bench_evaluate.py [--protocol known|all] [--preset auto|tiny|standard]
                                        [--device cpu|cuda] [--anonymizer baseline:identity]
                                        [--workers 1 0] [--code . OLD_CHECKOUT ...]
    python benchmarks/bench_evaluate.py --record RECORD.json ...   # a record already made

For each code tree (`--code`: this checkout by default; give a `git worktree` of an older commit
beside it to compare engines) and each `--workers` value (1: one model at a time; 0: auto, one
process per core on CPU; N: N processes side by side, sharing the cores or the GPU) the
evaluation runs in a fresh interpreter with that tree first on `PYTHONPATH` and a fresh
PABENCH_HOME (no cached fits or anonymized sets; pa-synth prebuilt there, not counted). The bench
prints, per protocol, wall seconds, CPU seconds per wall second (the child and its workers),
anonymizer calls per clip, the scores and the raw reference's per-attacker cMAP (so speed and
attacker strength are compared in the same run on the same machine), the stage table from
the record's timings, and the training FLOPs the fits performed, as achieved FLOP/s against
this machine's peak measured at the start of the run (`bench_levers.peak_gflops`: a GEMM and a
3x3 convolution on every core). The wall time includes the raw (identity) reference, which later
evaluations reuse from the cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = ("validate", "anonymize", "train_side_by_side", "compute_train",
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


def _sample_flops(arch: str, frames: int, size: int) -> tuple[float, float]:
    """FLOPs of one sample through `arch`: forward + backward (`bench_levers.step_fn`'s count
    for a training step, the optimizer's elementwise work left out) and forward alone
    (validation), both counted by FlopCounterMode on a batch."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    sys.path.insert(0, str(Path(__file__).parent))
    import bench_levers

    _, step = bench_levers.step_fn(arch, frames, size, channels_last=False, bf16=False)
    torch.manual_seed(0)
    x, _ = bench_levers._inputs(arch, frames, size)
    model = bench_levers.build_model(arch, 8, size)
    with FlopCounterMode(display=False) as forward, torch.no_grad():
        model(x[0])
    return step / bench_levers.BATCH, forward.get_total_flops() / bench_levers.BATCH


def training_flops(rec: dict, preset: str) -> float:
    """FLOPs the record's target and attacker fits performed: every attempt (LR retries
    included) of every seed, for the epochs its curve ran, on the sizes `fit` uses (the
    schedule's `val_fraction` held out; frame models draw `frames_per_epoch` frames per video
    and validate on `eval_frames`). A raw-reference fit identical to the submission's (the same
    curves: one cached fit, as for the identity) counts once."""
    from pabench.data.synth import get_preset
    from pabench.models import MODELS
    from pabench.protocols import get_protocol
    from pabench.training import FitSpec

    p = get_protocol(f"{rec['protocol']['id']}@{rec['protocol']['version']}")
    clip = get_preset(preset)
    frames, size = p.clip.frames or clip.frames, p.clip.size or clip.size
    sched, defaults = p.schedule, {f.name: f.default for f in dataclasses.fields(FitSpec)}
    reps, eval_frames = defaults["frames_per_epoch"], defaults["eval_frames"]
    fits = {}
    sides = [(rec["metrics"], rec["attackers"]), (rec["raw"] or {}, rec["raw_attackers"] or [])]
    for metrics, attackers in sides:
        models = [(p.target, p.action_train, metrics.get("target_curves") or [])]
        models += [(a["arch"], p.privacy_train, a["curves"]) for a in attackers]
        for arch, ref, curves in models:
            for curve in curves:
                fits[(arch, ref.dataset, json.dumps(curve, sort_keys=True))] = curve["epochs"]
    total, cost = 0.0, {}
    for (arch, dataset, _), epochs in fits.items():
        kind = MODELS.get(arch).kind
        n = clip.counts[dataset]["train"]
        n_val = max(1, round(n * sched.val_fraction))
        drawn = (n - n_val) * (reps if kind == "frame" else 1)
        train = len(range(0, drawn - sched.batch_size // 2, sched.batch_size)) * sched.batch_size
        val = n_val * (eval_frames if kind == "frame" else 1)
        if arch not in cost:
            cost[arch] = _sample_flops(arch, frames, size)
        step, forward = cost[arch]
        total += epochs * (train * step + val * forward)
    return total


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
        print(json.dumps(row(rec.model_dump(mode="json"), args.preset, wall, cpu / wall)),
              flush=True)


def row(rec: dict, preset: str, wall: float, cpu_per_wall: float) -> dict:
    """What `report` prints of one record."""
    t = rec["timings"]
    return {"protocol": rec["protocol"]["id"], "wall": wall, "cpu_per_wall": cpu_per_wall,
            "calls": t.get("anonymizer_calls", 0) / max(t.get("anonymized_clips", 1), 1),
            "top1": rec["metrics"]["action"], "cmap": rec["metrics"]["privacy_cmap"],
            "raw": (rec["raw"] or {}).get("privacy_cmap", float("nan")),
            "raw_attackers": {a["arch"]: a["cmap"] for a in rec["raw_attackers"] or []},
            "hardware": rec["hardware"], "timings": t,
            "train_flops": training_flops(rec, preset)}


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


def report(name: str, rows: list[dict], peak: dict[str, float]) -> float:
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
    print("stage (s summed over protocols; compute_train sums the workers' "
          "seconds):")
    for s in STAGES:
        if sums[s]:
            print(f"  {s:22s} {sums[s]:8.1f}  {sums[s] / total:6.1%} of wall")
    print(f"total wall {total:.1f} s")
    flops = sum(r["train_flops"] for r in rows)
    wall, cpu = sums["train_side_by_side"] or sums["compute_train"], sums["compute_train"]
    print(f"training: {flops / 1e12:.1f} TFLOP in the fits; {flops / wall / 1e9:.1f} GFLOP/s over "
          f"the training wall time ({flops / wall / 1e9 / peak['gemm fp32']:.1%} of the GEMM "
          f"peak, {flops / wall / 1e9 / peak['conv3x3 fp32']:.1%} of the conv peak), "
          f"{flops / cpu / 1e9:.1f} GFLOP per worker CPU second")
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny", help="auto: standard on a GPU, tiny on CPU")
    ap.add_argument("--protocol", default="known", help="a pa-synth protocol id, or all")
    ap.add_argument("--anonymizer", default="baseline:identity")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int, nargs="+", default=[0])
    ap.add_argument("--code", type=Path, nargs="+", default=[Path(__file__).parent.parent])
    ap.add_argument("--record", type=Path, nargs="+",
                    help="no evaluation: the report of records already written, every fit of "
                         "which trained in the call that wrote it (their FLOPs against this "
                         "machine's peak, so run it on the machine that made them)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    from pabench.data.home import synth_dir
    from pabench.data.synth import build_synth, resolve_preset

    args.preset = resolve_preset(args.preset, args.device)
    sys.path.insert(0, str(Path(__file__).parent))
    import bench_levers

    bench_levers.DEVICE = args.device
    peak = bench_levers.peak_gflops()
    print("peak of this machine, every core: " + ", ".join(f"{k} {v:.1f} GFLOP/s"
                                                        for k, v in peak.items()))
    if args.record:
        from pabench.records import read_record

        flops = 0.0
        for path in args.record:
            rec = read_record(path).model_dump(mode="json")
            rows = [row(rec, rec["benchmark"]["preset"], rec["timings"]["total"], float("nan"))]
            report(str(path), rows, peak)
            flops += rows[0]["train_flops"]
        print(f"\nall {len(args.record)} records: {flops / 1e12:.1f} TFLOP of training, at least "
              f"{flops / peak['gemm fp32'] / 1e9 / 60:.1f} min at the GEMM peak and "
              f"{flops / peak['conv3x3 fp32'] / 1e9 / 60:.1f} min at the conv peak")
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PABENCH_HOME"] = tmp
        build_synth(synth_dir(args.preset), preset=args.preset)
        walls = {}
        for code in args.code:
            for w in args.workers:
                name = f"code={code} workers={w}"
                walls[name] = report(name, run(args, code, w, Path(tmp) / "datasets"), peak)
    first = next(iter(walls))
    print(f"\nwall ratio vs {first}: " + ", ".join(f"{n} x{walls[first] / t:.2f}"
                                                  for n, t in list(walls.items())[1:]))


if __name__ == "__main__":
    main()
