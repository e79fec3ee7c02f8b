"""Training of fresh targets and attackers, to convergence, on CPU, GPU or several (DDP).

Attacker strength decides a privacy score, so every model trains with early stopping on a
held-out validation split under a generous epoch cap, and every attempt's per-epoch validation
curve is returned (`Trace`) for the record: convergence is shown, not asserted; an anonymizer
must never win by merely slowing attackers down. Under `torchrun` the model is
wrapped in DistributedDataParallel and each rank takes a slice of every batch; validation runs
on every rank so that stopping decisions agree without communication.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from pabench.errors import PabenchError
from pabench.io import Progress
from pabench.metrics import privacy_scores, top1
from pabench.models import MODELS, build_model
from pabench.protocols import Schedule
from pabench.runtime import is_distributed, rank_world, wrap_ddp

Task = Literal["multiclass", "multilabel"]
Amp = Literal["auto", "off", "bf16", "fp16"]


@dataclass(frozen=True)
class FitSpec:
    model: str
    task: Task
    num_outputs: int
    clip_frames: int
    input_size: int
    schedule: Schedule
    augment: tuple[str, ...]
    seed: int
    device: str = "cpu"
    eval_frames: int = 8  # frames per video an attacker averages over at test time
    frames_per_epoch: int = 4  # frame models: random frames drawn per video per epoch
    loader_workers: int = 0  # processes reading batches and prediction chunks ahead
    amp: Amp = "auto"  # see `autocast_dtype`
    standardize: bool = False  # see `Standardized` (protocol v4)

    @property
    def amp_dtype(self) -> torch.dtype | None:
        return autocast_dtype(self.amp, self.device)


def autocast_dtype(amp: Amp, device: str) -> torch.dtype | None:
    """Autocast dtype: `auto` is bf16 on a GPU that has it (fp16 on older ones, which needs a
    GradScaler) and none on CPU, where bf16 is slower for these models on avx512_bf16 without
    AMX (docs/performance.md); `bf16` on CPU exists so the GPU path is tested here."""
    if amp == "auto":
        if torch.device(device).type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]


def memory_format(x: torch.Tensor) -> torch.memory_format:
    """channels_last(_3d): 1.1-1.3x per training step on CPU (benchmarks/bench_levers.py) and
    the layout cuDNN's fast convolution kernels want."""
    return {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim(),
                                                                   torch.contiguous_format)


def prepare(model: nn.Module, device: str) -> nn.Module:
    """A fresh model on `device` in the layout its inputs will have; cuDNN may pick kernels by
    timing them, since every batch of a fit has the same shape."""
    if torch.device(device).type == "cuda":
        torch.backends.cudnn.benchmark = True
    model.to(device=device)
    for m in model.modules():  # per layer: a video model may run 2D layers on its frames
        if isinstance(m, nn.Conv2d | nn.Conv3d):
            m.to(memory_format=torch.channels_last if isinstance(m, nn.Conv2d)
                 else torch.channels_last_3d)
    return model


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


def _loss(logits: torch.Tensor, y: torch.Tensor, task: Task) -> torch.Tensor:
    if task == "multiclass":
        return F.cross_entropy(logits, y)
    return F.binary_cross_entropy_with_logits(logits, y)


def clip_starts(length: int, frames: int, clips: int) -> np.ndarray:
    """Equidistant clip starts covering the video (duplicates dropped for short videos)."""
    if length < frames:
        raise PabenchError(f"video of {length} frames is shorter than the {frames}-frame clip")
    return np.unique(np.linspace(0, length - frames, clips).round().astype(int))


@torch.no_grad()
def predict(model: nn.Module, spec: FitSpec, videos: np.ndarray, clips: int = 10,
            batch_size: int = 64, index: np.ndarray | None = None) -> np.ndarray:
    """Probabilities: sigmoid for multi-label, softmax otherwise. Video models: per clip,
    [N, K, C] (the caller averages clips per video). Frame models: averaged over `eval_frames`
    equidistant frames, [N, C]. `index` picks videos (in its order) batch by batch, so a
    memory-mapped split is never copied whole."""
    model.eval()
    kind = MODELS.get(spec.model).kind
    videos = model_input(spec, videos)
    length = videos.shape[1]
    rows = np.arange(len(videos)) if index is None else np.asarray(index)
    out = []

    amp = spec.amp_dtype

    def probs(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(torch.device(spec.device).type, amp, enabled=amp is not None):
            logits = model(x).float()
        return torch.sigmoid(logits) if spec.task == "multilabel" else torch.softmax(logits, 1)

    # video models read whole videos (several clips each), frame models only those frames
    t = (slice(None) if kind == "video" else
         np.unique(np.linspace(0, length - 1, min(spec.eval_frames, length)).round().astype(int)))
    for chunk in _chunks(spec, videos, rows, t, batch_size):  # [b, T or k, H, W, 3] uint8
        if kind == "video":
            per_clip = [probs(_to_float(chunk[:, s:s + spec.clip_frames].permute(0, 4, 1, 2, 3)
                                        .contiguous(), spec.device)).cpu().numpy()
                        for s in clip_starts(length, spec.clip_frames, clips)]
            out.append(np.stack(per_clip, axis=1))
        else:
            b, k = chunk.shape[:2]
            x = _to_float(chunk.reshape(b * k, *chunk.shape[2:]).permute(0, 3, 1, 2)
                          .contiguous(), spec.device)
            out.append(probs(x).view(b, k, -1).mean(1).cpu().numpy())
    return np.concatenate(out)


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


@dataclass
class Trace:
    """One training attempt, epoch by epoch (the record's `Curve`)."""

    seed: int
    lr: float
    epochs: int = 0
    best_epoch: int = 0
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_score: list[float] = field(default_factory=list)
    chosen: bool = True

    def key_at(self, epoch: int, stop_on: str) -> tuple[float, ...]:
        """What an epoch is kept by, lower being better: its validation loss, its validation
        score negated, or (`score-last`) that score with equal scores going to the later
        epoch: a constant output (all-black) reads the same score every epoch, and keeping
        its first epoch would retry it and flag it as stopped early."""
        i = epoch - 1
        loss, score = self.val_loss[i], -self.val_score[i]
        return {"loss": (loss,), "score": (score,), "score-last": (score, -epoch)}[stop_on]

    def best_key(self, stop_on: str) -> tuple[float, ...]:
        return self.key_at(self.best_epoch, stop_on) if self.best_epoch else (math.inf,)


def _validate(model: nn.Module, spec: FitSpec, videos: np.ndarray, targets: np.ndarray,
              index: np.ndarray) -> tuple[float, float]:
    """Validation loss and score (top-1, or cMAP for multi-label targets) of the model's
    test-time prediction on `videos[index]` (labels `targets`): video models on their central
    clip, frame models averaged over `eval_frames` frames; the loss is the negative
    log-likelihood of those probabilities."""
    pred = predict(model, spec, videos, clips=1, index=index)
    pred = pred if pred.ndim == 2 else pred[:, 0]
    p = np.clip(pred.astype(np.float64), 1e-7, 1 - 1e-7)
    if spec.task == "multiclass":
        loss = float(-np.log(p[np.arange(len(targets)), targets]).mean())
        return loss, top1(pred, targets)
    y = targets.astype(np.float64)
    loss = float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())
    names = [str(j) for j in range(targets.shape[1])]
    cmap = privacy_scores(pred, targets, names).cmap
    return loss, cmap if np.isfinite(cmap) else 0.0


class Standardized(nn.Module):
    """`model` fed its input less the mean image of its training clips (per pixel and channel),
    each channel then divided by the spread left (protocol v4). The learned baselines' pa-synth
    outputs are a fixed pattern that varies by 0.3-0.9 grey levels from clip to clip;
    convolution + BatchNorm models fed them as they are stayed at chance (validation loss
    ln 2) although a linear probe read the attributes almost as on raw clips. Scaling each
    channel alone does not help (the fixed pattern sets the spread), removing the mean image
    does; dividing each pixel by its own spread would too, but amplifies noise where raw clips
    barely vary (`python benchmarks/fixed_pattern.py --method M --stretch MODE`). The statistics
    are buffers, so cached weights carry them."""

    def __init__(self, model: nn.Module, size: int) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.zeros(3, size, size))
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, 3, *(1,) * (x.dim() - 4))
        mean = self.mean.view(*shape, *self.mean.shape[1:])
        return self.model((x - mean) / self.scale.view(*shape, 1, 1))


# a sixteenth of a grey level: a channel constant over every training clip (the black
# control) stays 0 rather than dividing by zero
MIN_STD = 1 / (255 * 16)


def to_grey_levels(x: np.ndarray, mean: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """`x` less `mean`, divided by `spread` (floored at a sixteenth of a grey level), back in
    uint8 grey levels: 128 + 40 per spread, clipped at 3.2 spreads."""
    z = (x - mean) / np.maximum(spread, 255 * MIN_STD)
    return np.clip(np.rint(128 + z * 40), 0, 255).astype(np.uint8)


class FrameStandardized:
    """uint8 videos [N, T, H, W, 3] read with each frame less its own mean per channel,
    divided by its own spread, back in grey levels (`to_grey_levels`): the input of protocol
    v5's extra attacker (`ModelSpec.frame_standardized`), ahead of v4's mean image. spact's
    seed-2 f_A gave each clip a grey level and contrast of its own; every v4 attacker stayed
    near chance on it while the same CNN on clips standardized first read the attributes
    (`python benchmarks/held_out_attack.py`). Done on read, so a memory-mapped split is never
    copied; every index keeps a frame's height, width and channels last."""

    def __init__(self, videos: np.ndarray) -> None:
        self.videos = videos
        self.shape, self.dtype = videos.shape, videos.dtype

    def __len__(self) -> int:
        return len(self.videos)

    def __getitem__(self, key: object) -> np.ndarray:
        x = np.asarray(self.videos[key], dtype=np.float32)
        return to_grey_levels(x, x.mean((-3, -2), keepdims=True),
                              x.std((-3, -2), keepdims=True))


def model_input(spec: FitSpec, videos: np.ndarray) -> np.ndarray:
    """`videos` as `spec`'s model reads them (once: validation predicts on fit's view)."""
    if MODELS.get(spec.model).frame_standardized and not isinstance(videos, FrameStandardized):
        return FrameStandardized(videos)  # type: ignore[return-value]  # indexes like one
    return videos


def centre_stats(videos: np.ndarray, chunk: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean image [3, H, W] of `videos` (uint8 [N, T, H, W, 3]) over every clip and frame,
    and each channel's spread [3] about it; read `chunk` videos at a time so a memory-mapped
    split is never copied whole."""
    total = np.zeros(videos.shape[2:])
    squares = np.zeros(videos.shape[2:])
    for i in range(0, len(videos), chunk):
        x = np.asarray(videos[i:i + chunk], dtype=np.float64) / 255
        total += x.sum((0, 1))
        squares += (x * x).sum((0, 1))
    count = videos.shape[0] * videos.shape[1]
    mean = total / count
    spread = np.sqrt(np.maximum(squares / count - mean * mean, 0.0).mean((0, 1)))
    return (torch.tensor(mean.transpose(2, 0, 1), dtype=torch.float32),
            torch.tensor(spread, dtype=torch.float32).clamp_min(MIN_STD))


def build_for(spec: FitSpec) -> nn.Module:
    """A fresh model as `spec` trains it: behind `Standardized` when the protocol asks."""
    model = build_model(spec.model, spec.num_outputs, spec.input_size)
    return Standardized(model, spec.input_size) if spec.standardize else model


def fit(spec: FitSpec, videos: np.ndarray, targets: np.ndarray,
        progress: Progress | None = None, stage: str = "train"
        ) -> tuple[nn.Module, list[Trace]]:
    """Train a fresh model with early stopping; returns the best-on-validation model and every
    attempt's trace (the last chosen one marked; see `Schedule` for the retry rule)."""
    sched = spec.schedule
    if MODELS.get(spec.model).kind == "video" and videos.shape[1] < spec.clip_frames:
        raise PabenchError(f"{stage}: videos of {videos.shape[1]} frames are shorter than "
                           f"{spec.model}'s {spec.clip_frames}-frame clip")
    videos = model_input(spec, videos)
    stats = centre_stats(videos) if spec.standardize else None
    model, trace = _attempt(spec, videos, targets, sched.lr, progress, stage, stats)
    traces = [trace]
    if sched.retry_lrs and trace.best_epoch <= max(1, sched.max_epochs // 10):
        for lr in sched.retry_lrs:
            m, t = _attempt(spec, videos, targets, lr, progress, f"{stage}, retry at lr {lr:g}",
                            stats)
            traces.append(t)
            if t.best_key(sched.stop_on) < min(x.best_key(sched.stop_on) for x in traces[:-1]):
                model = m
        best = min(traces, key=lambda x: x.best_key(sched.stop_on))
        for t in traces:
            t.chosen = t is best
    if progress:
        progress(stage, sched.max_epochs, sched.max_epochs)
    return model, traces


def _attempt(spec: FitSpec, videos: np.ndarray, targets: np.ndarray, lr: float,
             progress: Progress | None, stage: str,
             stats: tuple[torch.Tensor, torch.Tensor] | None) -> tuple[nn.Module, Trace]:
    sched = spec.schedule
    torch.manual_seed(spec.seed)
    rng = np.random.default_rng(spec.seed)
    kind = MODELS.get(spec.model).kind
    # A frame model sees `frames_per_epoch` random frames of each video per epoch: one frame
    # gives too few steps per epoch, and early stopping then halts attackers on a plateau.
    reps = min(spec.frames_per_epoch, videos.shape[1]) if kind == "frame" else 1
    order = rng.permutation(len(videos))
    n_val = max(1, int(round(len(videos) * sched.val_fraction)))
    val, train = order[:n_val], order[n_val:]
    model = build_for(spec)
    anchor = None
    if isinstance(model, Standardized) and stats is not None:
        model.mean.copy_(stats[0])
        model.scale.copy_(stats[1])
        anchor = stats[0].to(spec.device)
    model = prepare(model, spec.device)
    rank, world = rank_world()
    distributed = is_distributed()
    net = wrap_ddp(model, spec.device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=sched.weight_decay)
    steps = len(range(0, len(train) * reps - sched.batch_size // 2, sched.batch_size))
    total = max(1, steps * sched.max_epochs)
    decay = ((lambda i: 0.5 * (1 + math.cos(math.pi * min(i, total) / total)))
             if sched.lr_decay == "cosine" else (lambda i: 1.0))
    lr_at = torch.optim.lr_scheduler.LambdaLR(opt, decay)
    y_all = torch.from_numpy(targets.astype(np.int64 if spec.task == "multiclass"
                                            else np.float32))
    amp = spec.amp_dtype
    device_type = torch.device(spec.device).type
    # fp16 overflows without loss scaling; bf16 has fp32's range and needs none
    scaler = torch.amp.GradScaler(device_type, enabled=amp == torch.float16)
    trace = Trace(seed=spec.seed, lr=lr)
    best_key: tuple[float, ...] = (math.inf,)
    best_state = None
    for epoch in range(1, sched.max_epochs + 1):
        net.train()
        perm = rng.permutation(np.repeat(train, reps))
        losses = []
        draws = [_draw(perm[i:i + sched.batch_size][rank::world], videos.shape, kind,
                       spec.clip_frames, spec.augment, rng)
                 for i in range(0, len(perm) - sched.batch_size // 2, sched.batch_size)]
        for draw, gathered in zip(draws, _batches(spec, videos, draws, kind), strict=True):
            idx = draw.idx
            x = _augment(_to_float(gathered, spec.device), draw, anchor)
            with torch.autocast(device_type, amp, enabled=amp is not None):
                logits = net(x)
            loss = _loss(logits.float(), y_all[idx].to(spec.device, non_blocking=True),
                         spec.task)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            lr_at.step()
            losses.append(loss.detach())  # read once per epoch: no GPU sync per step
        mean_loss = torch.stack(losses).mean().item() if losses else float("nan")
        if losses and not math.isfinite(mean_loss):
            raise PabenchError(f"{stage}: training loss became {mean_loss} in epoch {epoch}")
        if distributed:  # BatchNorm statistics drift per rank: take rank 0's everywhere
            for buf in model.buffers():
                dist.broadcast(buf, 0)
        val_loss, val_score = _validate(model, spec, videos, targets[val], val)
        trace.train_loss.append(mean_loss)
        trace.val_loss.append(val_loss)
        trace.val_score.append(val_score)
        trace.epochs = epoch
        key = trace.key_at(epoch, sched.stop_on)
        if key < best_key:
            best_key, trace.best_epoch, best_state = key, epoch, copy.deepcopy(model.state_dict())
        if progress:
            progress(stage, epoch, sched.max_epochs)
        if epoch >= sched.min_epochs and epoch - trace.best_epoch >= sched.window:
            break
    assert best_state is not None
    model.load_state_dict(best_state)
    return model, trace
