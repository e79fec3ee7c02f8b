"""What a fit's model reads, from the uint8 videos to the device: each training batch's random
choices (`_Draw`), drawn by the training process before any loader worker copies its bytes so
that the numbers do not depend on how many read ahead, the label-preserving augmentation they
drive, and the loaders of training batches and prediction chunks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from pabench.training.fitting import FitSpec


def memory_format(x: torch.Tensor) -> torch.memory_format:
    """channels_last(_3d): 1.1-1.3x per training step on CPU (benchmarks/bench_levers.py) and
    the layout cuDNN's fast convolution kernels want."""
    return {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim(),
                                                                   torch.contiguous_format)


def _to_float(x: np.ndarray | torch.Tensor, device: str) -> torch.Tensor:
    """uint8 [B, C, (T,) H, W] from the host to `device` as float in [0, 1]: the copy moves
    bytes (4x less than floats), from pinned memory and asynchronously on a GPU."""
    t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    if torch.device(device).type == "cuda":
        t = t.pin_memory().to(device, non_blocking=True)
    t = t.float().div_(255)
    return t.contiguous(memory_format=memory_format(t))


@dataclass(frozen=True)
class _Draw:
    """One training batch's random choices, in the order the loop has always drawn them: per
    sample the frame (frame models) or the clip's first frame (video models), then the shift
    offsets and flips of the augmentation."""

    idx: np.ndarray
    at: np.ndarray
    shift: np.ndarray | None  # [2, B]: row and column offsets into the padded frame
    flip: np.ndarray | None  # [B] bool


def _draw(idx: np.ndarray, shape: tuple[int, ...], kind: str, frames: int,
          ops: tuple[str, ...], rng: np.random.Generator) -> _Draw:
    """The choices of a batch of videos `idx` from an array of `shape` [N, T, H, W, 3]."""
    n, length = len(idx), shape[1]
    at = rng.integers(0, length if kind == "frame" else length - frames + 1, n)
    m = max(1, shape[3] // 16)  # the shift's margin: a sixteenth of the width
    shift = rng.integers(0, 2 * m + 1, (2, n)) if "shift" in ops else None
    flip = rng.random(n) < 0.5 if "flip" in ops else None
    return _Draw(idx, at, shift, flip)


def _gather(videos: np.ndarray, idx: np.ndarray, at: np.ndarray, kind: str,
            frames: int) -> np.ndarray:
    """Training view: frame `at` (frame models, [B, 3, H, W]) or the clip of `frames` frames
    from `at` (video models, [B, 3, T, H, W]) of each video `idx`."""
    if kind == "frame":
        return videos[idx, at].transpose(0, 3, 1, 2)
    clips = videos[np.asarray(idx)[:, None], at[:, None] + np.arange(frames)]
    return clips.transpose(0, 4, 1, 2, 3)


def _augment(x: torch.Tensor, draw: _Draw, anchor: torch.Tensor | None = None) -> torch.Tensor:
    """Label-preserving augmentation on [B, C, (T,) H, W] with a batch's drawn offsets and
    flips. No flip on pa-synth: left/right walking are distinct actions there. With `anchor`
    (a standardized fit's mean image [C, H, W]) only the clip's departure from it moves: a
    fixed pattern shifted by two pixels differs from itself by far more than the grey level
    by which the learned baselines' outputs vary, and swamped it (protocol v4)."""
    if anchor is not None:
        fixed = anchor.view(1, anchor.shape[0], *(1,) * (x.dim() - 4), *anchor.shape[1:])
        return _augment(x - fixed, draw) + fixed
    if draw.shift is not None:  # a random translation per sample, by index arithmetic
        m = max(1, x.shape[-1] // 16)
        pad = F.pad(x.flatten(0, -3)[:, None], (m, m, m, m), mode="replicate")[:, 0]
        pad = pad.view(len(x), -1, *pad.shape[-2:])  # [B, C*T, H+2m, W+2m]
        dy, dx = (torch.from_numpy(d).to(x.device) for d in draw.shift)
        h, w = x.shape[-2:]
        rows = (dy[:, None] + torch.arange(h, device=x.device))[:, :, None]  # [B, h, 1]
        cols = (dx[:, None] + torch.arange(w, device=x.device))[:, None, :]  # [B, 1, w]
        b = torch.arange(len(x), device=x.device)[:, None, None]
        x = pad[b, :, rows, cols].permute(0, 3, 1, 2).reshape(x.shape)  # [B, h, w, C*T] -> x
        x = x.contiguous(memory_format=memory_format(x))
    if draw.flip is not None:
        flip = torch.from_numpy(draw.flip).to(x.device)
        x = torch.where(flip.view(-1, *[1] * (x.dim() - 1)), x.flip(-1), x)
    return x


class _Gathered(torch.utils.data.Dataset):
    """An epoch's batches, whose random choices the training process drew beforehand: a
    loader worker only copies bytes out of the (memory-mapped) videos, so the numbers do not
    depend on how many workers read ahead."""

    def __init__(self, videos: np.ndarray, draws: list[_Draw], kind: str, frames: int) -> None:
        self.videos, self.draws, self.kind, self.frames = videos, draws, kind, frames

    def __len__(self) -> int:
        return len(self.draws)

    def __getitem__(self, i: int) -> torch.Tensor:
        d = self.draws[i]
        return torch.from_numpy(np.ascontiguousarray(
            _gather(self.videos, d.idx, d.at, self.kind, self.frames)))


def _loader(spec: FitSpec, items: torch.utils.data.Dataset) -> torch.utils.data.DataLoader:
    """`items` in order; with `loader_workers`, read by that many processes ahead of the
    model, into pinned memory on a GPU."""
    workers = spec.loader_workers
    return torch.utils.data.DataLoader(
        items, batch_size=None, num_workers=workers,
        pin_memory=torch.device(spec.device).type == "cuda",
        prefetch_factor=2 if workers else None,
        generator=torch.Generator())  # its worker seeds must not draw from torch's global RNG


def _batches(spec: FitSpec, videos: np.ndarray, draws: list[_Draw], kind: str,
             ) -> torch.utils.data.DataLoader:
    """The epoch's uint8 training batches in order."""
    return _loader(spec, _Gathered(videos, draws, kind, spec.clip_frames))


class _Chunked(torch.utils.data.Dataset):
    """Prediction chunks: videos `rows[i * size:(i + 1) * size]`, frames `t` of each."""

    def __init__(self, videos: np.ndarray, rows: np.ndarray, t: slice | np.ndarray,
                 size: int) -> None:
        self.videos, self.rows, self.t, self.size = videos, rows, t, size

    def __len__(self) -> int:
        return math.ceil(len(self.rows) / self.size)

    def __getitem__(self, i: int) -> torch.Tensor:
        rows = self.rows[i * self.size:(i + 1) * self.size]
        chunk = (self.videos[rows] if isinstance(self.t, slice)
                 else self.videos[rows[:, None], self.t])
        return torch.from_numpy(np.ascontiguousarray(chunk))


def _chunks(spec: FitSpec, videos: np.ndarray, rows: np.ndarray, t: slice | np.ndarray,
            size: int) -> torch.utils.data.DataLoader:
    """Prediction chunks in order."""
    return _loader(spec, _Chunked(videos, rows, t, size))
