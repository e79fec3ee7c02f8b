"""Memory and throughput of the real-data path as the number of videos grows.

For each N, a fresh process generates a corpus in the HMDB51 builder's layout (320x240 avi,
MPEG-4 part 2 like the original DivX files, 2-10 s, a moving textured scene), then runs the
real builder (`pabench.data.builders.hmdb51`), the loader (decode into the memory-mapped store),
an anonymizer (baseline:downsample-4x) and one training epoch of a frame attacker (tiny2d) over
the anonymized store, and reports videos/s, peak memory and disk. Peak memory is sampled from
/proc/self/status per phase: `anon` is private memory (what must fit in RAM), `rss` adds the
mapped store pages the kernel can reclaim at any time (page cache, not allocations).

    OMP_NUM_THREADS=1 python benchmarks/bench_real_scale.py            # N = 250, 1000
    OMP_NUM_THREADS=1 python benchmarks/bench_real_scale.py --large    # and N = 4000
    python benchmarks/bench_real_scale.py --real-spec   # the real clip spec (16x4 at 112)

The default clip spec is smaller than the real protocols' (8 frames x 4 clips at 56x56 instead
of 16 x 4 at 112x112, 8x fewer bytes per video) and the corpus is 15 fps instead of HMDB51's
30, so the sweep runs in minutes on 2 cores; memory per video scales with the store, which the
extrapolation accounts for with the real spec's 2.4 MB per video.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REAL_SIZES = {"HMDB51": 6766, "UCF101": 13320, "P-HVU": 245212 + 16012}  # SPAct counts
REAL_STORE_BYTES = 16 * 4 * 112 * 112 * 3  # one decoded video at the real clip spec


class Sampler:
    """Peak VmRSS and RssAnon (MiB) per phase, read from /proc every 20 ms."""

    def __init__(self) -> None:
        self.phase = "start"
        self.peaks: dict[str, dict[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _read(self) -> dict[str, float]:
        fields = {}
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                fields[key] = int(value.split()[0]) / 1024
        return fields

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            self.sample()

    def sample(self) -> None:
        peak = self.peaks.setdefault(self.phase, {"rss": 0.0, "anon": 0.0})
        now = self._read()
        peak["rss"] = max(peak["rss"], now["VmRSS"])
        peak["anon"] = max(peak["anon"], now["RssAnon"])

    def stop(self) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()


def disk(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def generate(src: Path, n: int, fps: int, seed: int = 0) -> None:
    """N avi videos under src/hmdb51/<class>/ and split-1 lists naming them (70% train)."""
    import av

    from pabench.data.builders import hmdb51

    rng = np.random.default_rng(seed)
    classes = hmdb51.HMDB51_CLASSES
    lists: dict[str, list[str]] = {c: [] for c in classes}
    yy, xx = np.mgrid[0:240, 0:320 + 4 * 10 * fps]  # wide enough to pan over for 10 s
    for i in range(n):
        cls = classes[i % len(classes)]
        name = f"video{i:05d}_{cls}_f_cm_np1_fr_med_0.avi"
        path = src / hmdb51.VIDEO_DIR / cls / name
        path.parent.mkdir(parents=True, exist_ok=True)
        fx, fy = rng.uniform(0.02, 0.1, 2)
        wave = np.sin(fx * xx) + np.cos(fy * yy)
        scene = np.clip(rng.integers(0, 255, 3) + 60 * wave[..., None], 0, 255).astype(np.uint8)
        with av.open(str(path), "w", format="avi") as out:
            stream = out.add_stream("mpeg4", rate=fps)
            stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
            for t in range(int(rng.uniform(2, 10) * fps)):
                frame = np.ascontiguousarray(scene[:, 4 * t:4 * t + 320])  # a camera pan
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        lists[cls].append(f"{name} {1 if rng.random() < 0.7 else 2}")
    folder = src / hmdb51.SPLIT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for cls, lines in lists.items():
        (folder / f"{cls}_test_split1.txt").write_text("\n".join(lines) + "\n")


def one(n: int, work: Path, frames: int, size: int, fps: int) -> dict:
    """Everything for one N, in this (fresh) process."""
    src, home = work / "source", work / "home"
    t0 = time.perf_counter()
    generate(src, n, fps)
    generate_s = time.perf_counter() - t0
    os.environ["PABENCH_HOME"] = str(home)
    import torch

    from pabench.anonymizers import BuildContext, get_anonymizer
    from pabench.data.builders import hmdb51
    from pabench.data.clipset import load_clipset
    from pabench.evaluation.anonymize import anonymize
    from pabench.evaluation.data import Run
    from pabench.protocols import PROTOCOLS, REAL_FRAMES_PER_CLIP, Schedule
    from pabench.submission import from_module
    from pabench.training import FitSpec, fit, predict

    torch.set_num_threads(1)
    sampler = Sampler()
    times: dict[str, float] = {"generate": generate_s}

    def phase(name: str) -> None:
        sampler.sample()
        sampler.phase = name
        times[name] = time.perf_counter()

    phase("build")
    out = home / "datasets" / "hmdb51"
    report = hmdb51.build(src, out)
    phase("load")
    sets = {s: load_clipset(out, s, frames=frames * REAL_FRAMES_PER_CLIP, size=size,
                            cache_dir=home / "decoded") for s in ("train", "test")}
    phase("anonymize")
    run = Run(protocol=PROTOCOLS.get("ucf101-vispr1"), benchmark="real", preset="tiny",
              data_dir=home / "datasets", work_dir=home / "runs", device="cpu", seeds=(0,),
              frames=frames, size=size, progress=None)
    base = get_anonymizer("downsample-4x")
    sub = from_module("downsample-4x", base.build(BuildContext(benchmark="real")))
    anon = {s: anonymize(run, sub, c) for s, c in sets.items()}
    phase("train")
    spec = FitSpec(model="tiny2d", task="multiclass", num_outputs=51, clip_frames=frames,
                   input_size=size, schedule=Schedule(max_epochs=1, min_epochs=1, batch_size=32),
                   augment=("shift", "flip"), seed=0)
    model, _ = fit(spec, anon["train"].videos, anon["train"].action)
    predict(model, spec, anon["test"].videos)
    phase("end")
    sampler.stop()
    stamps = list(times.items())
    durations = {k: v if k == "generate" else stamps[i + 1][1] - v
                 for i, (k, v) in enumerate(stamps) if k != "end"}
    videos = sum(report.videos.values())
    return {
        "n": n, "videos": videos, "seconds": durations,
        "videos_per_s": {k: videos / v for k, v in durations.items() if v > 0},
        "peak_mib": {k: v for k, v in sampler.peaks.items() if k not in ("start", "end")},
        "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "disk_mib": {"source": disk(src) / 2**20, "built": disk(out) / 2**20,
                     "decoded": disk(home / "decoded") / 2**20,
                     "anonymized": disk(home / "runs") / 2**20},
        "store_bytes_per_video": sets["train"].videos[0].nbytes,
    }


def table(results: list[dict]) -> str:
    phases = ("build", "load", "anonymize", "train")
    lines = ["| N | " + " | ".join(f"{p} videos/s" for p in phases)
             + " | " + " | ".join(f"{p} peak anon / rss MiB" for p in phases)
             + " | ru_maxrss MiB | disk built / decoded / anonymized MiB |",
             "|---" * (2 + 2 * len(phases) + 1) + "|"]
    for r in results:
        speed = " | ".join(f"{r['videos_per_s'][p]:.1f}" for p in phases)
        peaks = " | ".join(f"{r['peak_mib'][p]['anon']:.0f} / {r['peak_mib'][p]['rss']:.0f}"
                           for p in phases)
        d = r["disk_mib"]
        lines.append(f"| {r['videos']} | {speed} | {peaks} | {r['maxrss_mib']:.0f} | "
                     f"{d['built']:.0f} / {d['decoded']:.0f} / {d['anonymized']:.0f} |")
    return "\n".join(lines)


def extrapolate(results: list[dict]) -> str:
    """Private memory from the largest N (flat in N); time and disk scale linearly."""
    r = results[-1]
    anon = max(p["anon"] for p in r["peak_mib"].values())
    per_video_s = {p: 1 / v for p, v in r["videos_per_s"].items()}
    lines = [f"peak private memory (any N): {anon:.0f} MiB here (store {r['store_bytes_per_video']}"
             f" B/video); at the real spec the store is {REAL_STORE_BYTES / 2**20:.2f} MiB/video"]
    for name, n in REAL_SIZES.items():
        hours = sum(per_video_s[p] for p in ("build", "load", "anonymize")) * n / 3600
        lines.append(f"{name} ({n} videos): decoded store {n * REAL_STORE_BYTES / 2**30:.1f} GiB"
                     f" + anonymized copy {n * REAL_STORE_BYTES / 2**30:.1f} GiB on disk; "
                     f"build+load+anonymize {hours:.1f} h at this corpus' rate on 1 thread")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[250, 1000])
    ap.add_argument("--large", action="store_true", help="add N = 4000")
    ap.add_argument("--real-spec", action="store_true", help="16 frames x 4 clips at 112x112")
    ap.add_argument("--fps", type=int, default=15)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: one N in-process
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    frames, size = (16, 112) if args.real_spec else (8, 56)
    if args.one is not None:
        print(json.dumps(one(args.one, args.work, frames, size, args.fps)))
        return
    sizes = [*args.sizes, *([4000] if args.large else [])]
    results = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"bench-real-{n}-") as work:
            cmd = [sys.executable, __file__, "--one", str(n), "--work", work,
                   "--fps", str(args.fps), *(["--real-spec"] if args.real_spec else [])]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), file=sys.stderr)
    print(f"clip spec: {frames} frames x 4 clips at {size}x{size}; corpus {args.fps} fps")
    print(table(results))
    print(extrapolate(results))


if __name__ == "__main__":
    main()
