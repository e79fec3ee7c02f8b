"""Decoding speed: ffmpeg's own decoder threads against one thread per video, several videos at
once. pabench keeps ffmpeg's default (`pabench.data.hub.decode_video`, 2 videos at once in
`load_clipset`): on idle cores one thread per video bought nothing on pa-synth clips and cost
HMDB51-sized videos about a fifth (docs/performance.md).

Two corpora: pa-synth tiny's action train split (8 frames of 32x32, H.264 mp4) and N videos in
HMDB51's layout (320x240 MPEG-4 avi, 2-10 s at 30 fps, `bench_real_scale.generate`). Every
video is decoded whole to rgb24, under each decoder threading mode, with a pool of 1, 2 and
all usable cores; then `load_clipset` decodes the synth split into a fresh store. Ratios are
against ffmpeg's default threading with `load_clipset`'s pool of 2.

    python benchmarks/bench_decode.py            # on idle cores
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import av

sys.path.insert(0, str(Path(__file__).parent))
from bench_real_scale import generate  # noqa: E402

from pabench.data.clipset import load_clipset  # noqa: E402
from pabench.data.synth import build_synth  # noqa: E402
from pabench.evaluation.config import usable_cores  # noqa: E402


def decode_all(path: str, threading: str) -> int:
    with av.open(path) as container:
        stream = container.streams.video[0]
        if threading == "none":
            stream.thread_type = "NONE"
        return sum(1 for f in container.decode(stream) if f.to_ndarray(format="rgb24").size)


def per_video_ms(files: list[str], threading: str, pool: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(pool) as ex:
        list(ex.map(lambda f: decode_all(f, threading), files))
    return (time.perf_counter() - start) / len(files) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hmdb-videos", type=int, default=40)
    args = parser.parse_args()
    cores = usable_cores()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        build_synth(work / "synth", preset="tiny", seed=0, names=("synth-action",))
        generate(work / "hmdb", args.hmdb_videos, fps=30)
        corpora = {
            "pa-synth tiny": sorted(map(str, (work / "synth" / "synth-action" / "videos" /
                                              "train").glob("*.mp4"))),
            "HMDB51 layout": sorted(map(str, (work / "hmdb").rglob("*.avi"))),
        }
        print(f"{cores} usable cores, PyAV {av.__version__}")
        print("| corpus | videos | decoder threads | pool | ms/video | speed-up |")
        print("|---|---|---|---|---|---|")
        for corpus, files in corpora.items():
            base = per_video_ms(files, "default", 2)
            print(f"| {corpus} | {len(files)} | ffmpeg default | 2 | {base:.2f} | 1.00 |")
            for threading, pool in (("default", cores), ("none", 1), ("none", 2),
                                    ("none", cores)):
                ms = per_video_ms(files, threading, pool)
                label = "ffmpeg default" if threading == "default" else "one"
                print(f"| {corpus} | {len(files)} | {label} | {pool} | {ms:.2f} | "
                      f"{base / ms:.2f} |")
        start = time.perf_counter()
        clips = load_clipset(work / "synth" / "synth-action", "train",
                             cache_dir=work / "decoded")
        seconds = time.perf_counter() - start
        print(f"\nload_clipset(pa-synth tiny action train): {len(clips)} videos in "
              f"{seconds:.1f} s ({seconds / len(clips) * 1e3:.2f} ms/video)")


if __name__ == "__main__":
    main()
