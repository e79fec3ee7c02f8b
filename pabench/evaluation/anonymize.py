"""Apply the anonymizer once to every clip of a split, cached on disk."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import numpy as np
import torch

from pabench.data.clipset import ClipSet, as_frames, is_still, present
from pabench.data.npystore import STORE_FORMAT, NpyWriter, open_npy, sidecar
from pabench.errors import PabenchError
from pabench.evaluation.data import Run
from pabench.io import digest
from pabench.runtime import ANONYMIZER_FLOAT32, exact_float32, rank_world
from pabench.submission import Submission


def windows(length: int, frames: int) -> list[int]:
    """Start frames of consecutive clip-length windows covering a video; the last is aligned
    to the end, so every frame is anonymized exactly once or (the overlap) twice."""
    if length < frames:
        raise PabenchError(f"videos of {length} frames are shorter than the anonymizer's "
                           f"{frames}-frame clip")
    starts = list(range(0, length - frames + 1, frames))
    if starts[-1] + frames < length:
        starts.append(length - frames)
    return starts


@torch.no_grad()
def anonymize(run: Run, sub: Submission, clips: ClipSet, batch: int = 32) -> ClipSet:
    """`clips` as the anonymizer outputs them (cached by submission hash, data fingerprint,
    clip shape and the float32 precision it ran under); the output is checked for shape and
    finiteness on every batch.

    The copy is written batch by batch into its own store and memory-mapped, so it costs disk,
    not memory. Rank 0 writes the shared cache; other ranks (which compute the same copy, as
    every rank needs it) keep theirs in a private file removed once mapped."""
    mem_key = (sub.sha256, clips.name, clips.split)
    if mem_key in run.anonymized:
        return run.anonymized[mem_key]
    key = digest(sub.sha256, clips.fingerprint, run.frames, run.size, STORE_FORMAT,
                 ANONYMIZER_FLOAT32)
    path = run.work_dir / "anonymized" / f"{key[:32]}.npy"
    out = open_npy(path)
    if out is None:
        start = time.perf_counter()
        rank = rank_world()[0]
        target = path if rank == 0 else path.with_name(f"{path.stem}.rank{rank}.npy")
        out = _apply(run, sub, clips, batch, target)
        if rank != 0:  # the map keeps the data readable; the name is not needed any more
            with contextlib.suppress(OSError):
                target.unlink()
                sidecar(target).unlink()
        run.tick("anonymize", start)
    result = clips.with_videos(present(out, clips.videos.shape[1] if is_still(clips.videos)
                                       else None), f"anonymized:{sub.sha256}")
    run.anonymized[mem_key] = result
    return result


def _apply(run: Run, sub: Submission, clips: ClipSet, batch: int, path: Path) -> np.memmap:
    """Anonymize `batch` videos at a time into the store at `path`. A still image is one
    window of `run.frames` copies of itself (the clip a static camera gives), and its
    anonymized image is the window's central output frame, stored once like the input."""
    videos = clips.videos
    n, length = videos.shape[:2]
    still = is_still(videos)
    starts = [0] if still else windows(length, run.frames)
    stored_frames = 1 if still else length
    stage = f"anonymize {clips.name}/{clips.split}"
    calls = 0
    with NpyWriter(path, (n, stored_frames, *videos.shape[2:])) as writer, exact_float32():
        for i in range(0, n, batch):
            chunk = videos[i:i + batch]
            done = np.empty((len(chunk), stored_frames, *videos.shape[2:]), np.uint8)
            for s in starts:
                x = torch.from_numpy(np.array(chunk[:, s:s + run.frames])).to(run.device)
                x = x.permute(0, 4, 1, 2, 3).float().div_(255)
                y = sub.module(x)
                calls += x.shape[0]
                if y.shape != x.shape or not torch.isfinite(y).all():
                    problem = ("non-finite" if y.shape == x.shape
                               else f"of shape {list(y.shape)}, expected {list(x.shape)}")
                    raise PabenchError(
                        f"submission {sub.name}: output on {clips.name}/{clips.split} videos "
                        f"{i}..{i + len(x) - 1} is {problem}"
                    )
                if still:
                    y = y[:, :, run.frames // 2:run.frames // 2 + 1]
                frames = as_frames(y)
                done[:, s:s + frames.shape[1]] = frames
            writer.append(done)
            if run.progress:
                run.progress(stage, min(i + batch, n), n)
        out = writer.finish()
    run.count("anonymizer_calls", calls)
    run.count("anonymized_clips", n * len(starts))
    return out
