"""What a fit's model reads, from the uint8 videos to the device: each training batch's random
choices (`_Draw`), drawn by the training process before any loader worker copies its bytes so
that the numbers do not depend on how many read ahead, the label-preserving augmentation they
drive, and the loaders of training batches and prediction chunks; and SimCLR's views
(`simclr`), which the learned baselines' NT-Xent branch compares on real data."""

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


@dataclass(frozen=True)
class SimCLRDraw:
    """The random choices of SimCLR views, one row per view (fractions of the frame's size):
    the crop box, the flip, the colour jitter (brightness, contrast and saturation factors,
    hue shift in turns; identity where not applied), grey scale, and the cut-out box (NaN:
    none)."""

    box: np.ndarray  # [n, 4] x0, y0, x1, y1
    flip: np.ndarray  # [n] bool
    jitter: np.ndarray  # [n, 4]
    gray: np.ndarray  # [n] bool
    cutout: np.ndarray  # [n, 4] x0, y0, x1, y1

    def take(self, rows: np.ndarray) -> SimCLRDraw:
        return SimCLRDraw(self.box[rows], self.flip[rows], self.jitter[rows], self.gray[rows],
                          self.cutout[rows])


def _boxes(rng: np.random.Generator, n: int, scale: tuple[float, float],
           ratio: tuple[float, float]) -> np.ndarray:
    """`n` random boxes of `scale` of the area and aspect `ratio` (log-uniform)."""
    area = rng.uniform(*scale, n)
    aspect = np.exp(rng.uniform(np.log(ratio[0]), np.log(ratio[1]), n))
    w, h = np.minimum(np.sqrt(area * aspect), 1), np.minimum(np.sqrt(area / aspect), 1)
    x0, y0 = rng.uniform(0, 1 - w), rng.uniform(0, 1 - h)
    return np.stack([x0, y0, x0 + w, y0 + h], 1)


def simclr_draw(rng: np.random.Generator, n: int) -> SimCLRDraw:
    """SimCLR's augmentation at strength 1 (its Appendix A): random resized crop (8-100% of
    the area, aspect 3/4-4/3), horizontal flip, colour jitter 0.8/0.8/0.8/0.2 with
    probability 0.8, grey scale with probability 0.2; and SPAct's cut-out (supplement C.2),
    torchvision RandomErasing's defaults (probability 0.5, 2-33% of the area). No blur:
    SimCLR leaves it out at small image sizes, and SPAct's list does not name it."""
    box = _boxes(rng, n, (0.08, 1.0), (3 / 4, 4 / 3))
    flip = rng.random(n) < 0.5
    on = rng.random(n) < 0.8
    factors = np.stack([rng.uniform(0.2, 1.8, n), rng.uniform(0.2, 1.8, n),
                        rng.uniform(0.2, 1.8, n), rng.uniform(-0.2, 0.2, n)], 1)
    jitter = np.where(on[:, None], factors, np.array([1.0, 1.0, 1.0, 0.0]))
    gray = rng.random(n) < 0.2
    erase = rng.random(n) < 0.5
    cutout = np.where(erase[:, None], _boxes(rng, n, (0.02, 0.33), (0.3, 3.3)), np.nan)
    return SimCLRDraw(box, flip, jitter, gray, cutout)


def _gray(x: torch.Tensor) -> torch.Tensor:
    """ITU-R 601 luma of [n, 3, H, W], as [n, 1, H, W] (torchvision's grey scale)."""
    return (0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2])[:, None]


def _per_view(values: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(values, dtype=like.dtype, device=like.device).view(-1, 1, 1, 1)


_YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])


def simclr(frames: torch.Tensor, draw: SimCLRDraw) -> torch.Tensor:
    """The SimCLR views `draw` describes of frames [n, 3, H, W] in [0, 1], batched on their
    device: crops resized back by bilinear ROI pooling, the hue turned in YIQ space."""
    from torchvision.ops import roi_align

    n, _, h, w = frames.shape
    box = torch.as_tensor(draw.box, dtype=frames.dtype, device=frames.device)
    scale = torch.tensor([w, h, w, h], dtype=frames.dtype, device=frames.device)
    index = torch.arange(n, dtype=frames.dtype, device=frames.device)[:, None]
    x = roi_align(frames, torch.cat([index, box * scale], 1), (h, w), aligned=True)
    flip = torch.as_tensor(draw.flip, device=x.device).view(-1, 1, 1, 1)
    x = torch.where(flip, x.flip(-1), x)
    b, c, s, hue = (draw.jitter[:, k] for k in range(4))
    x = (x * _per_view(b, x)).clamp(0, 1)
    mean = _gray(x).mean((2, 3), keepdim=True)
    x = ((x - mean) * _per_view(c, x) + mean).clamp(0, 1)
    g = _gray(x)
    x = ((x - g) * _per_view(s, x) + g).clamp(0, 1)
    yiq = _YIQ.to(x)
    turn = torch.as_tensor(2 * np.pi * hue, dtype=x.dtype, device=x.device)
    cos, sin, one, zero = turn.cos(), turn.sin(), torch.ones_like(turn), torch.zeros_like(turn)
    rot = torch.stack([torch.stack([one, zero, zero], 1), torch.stack([zero, cos, -sin], 1),
                       torch.stack([zero, sin, cos], 1)], 1)  # [n, 3, 3]
    x = torch.einsum("ij,njk,kl,nlhw->nihw", torch.linalg.inv(yiq), rot, yiq, x).clamp(0, 1)
    gray = torch.as_tensor(draw.gray, device=x.device).view(-1, 1, 1, 1)
    x = torch.where(gray, _gray(x).expand_as(x), x)
    cut = torch.as_tensor(np.nan_to_num(draw.cutout, nan=-1.0), dtype=x.dtype, device=x.device)
    cols = (torch.arange(w, device=x.device, dtype=x.dtype) + 0.5) / w
    rows = (torch.arange(h, device=x.device, dtype=x.dtype) + 0.5) / h
    inside = ((cols[None, None, :] >= cut[:, 0, None, None])
              & (cols[None, None, :] < cut[:, 2, None, None])
              & (rows[None, :, None] >= cut[:, 1, None, None])
              & (rows[None, :, None] < cut[:, 3, None, None]))
    return x.masked_fill(inside[:, None], 0.0)
