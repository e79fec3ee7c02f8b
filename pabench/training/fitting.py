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
import time
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
from pabench.training.augment import _augment, _batches, _chunks, _draw, _gather, _to_float
from pabench.training.standardize import Standardized, centre_stats, model_input

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
    weights: str | None = None  # initial weights (`pabench.models.weights`); None: random
    weights_dir: str | None = None  # where they are read (None: $TORCH_HOME/hub/checkpoints)

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
    seconds: float | None = None
    flops: int | None = None

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


def build_for(spec: FitSpec) -> nn.Module:
    """A fresh model as `spec` trains it: behind `Standardized` when the protocol asks."""
    model = build_model(spec.model, spec.num_outputs, spec.input_size, spec.weights,
                        spec.weights_dir)
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
    started = time.perf_counter()
    per_sample = _forward_flops(model, spec, videos, kind)
    val_samples = len(val) * (min(spec.eval_frames, videos.shape[1]) if kind == "frame" else 1)
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
    trace.seconds = time.perf_counter() - started
    if per_sample is not None:
        trace.flops = trace.epochs * per_sample * (3 * len(train) * reps + val_samples)
    return model, trace


def _forward_flops(model: nn.Module, spec: FitSpec, videos: np.ndarray,
                   kind: str) -> int | None:
    """FLOPs of one training sample's forward pass (a clip, or a frame for a frame model),
    counted by torch's dispatcher-level counter in eval mode, so no BatchNorm statistic moves;
    None where the counter fails."""
    from torch.utils.flop_counter import FlopCounterMode

    at = np.zeros(1, np.int64)
    x = _to_float(_gather(videos, np.array([0]), at, kind, spec.clip_frames), spec.device)
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(x)
    except Exception:  # counting must never fail a training run
        return None
    finally:
        model.train()
    return int(counter.get_total_flops())
