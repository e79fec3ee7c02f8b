"""Training of fresh targets and attackers, to convergence, on CPU, GPU or several (DDP).

Attacker strength decides a privacy score, so every model trains with early stopping on a
held-out validation split under a generous epoch cap (the epochs used are recorded); an
anonymizer must never win by merely slowing attackers down. Under `torchrun` the model is
wrapped in DistributedDataParallel and each rank takes a slice of every batch; validation runs
on every rank so that stopping decisions agree without communication.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from pabench.errors import PabenchError
from pabench.metrics import privacy_scores, top1
from pabench.models import MODELS, build_model
from pabench.protocols import Schedule
from pabench.runtime import Progress, is_distributed, rank_world, wrap_ddp

Task = Literal["multiclass", "multilabel"]


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


def _to_float(x: np.ndarray, device: str) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x)).to(device).float().div_(255)


def _augment(x: torch.Tensor, ops: tuple[str, ...], rng: np.random.Generator) -> torch.Tensor:
    """Label-preserving augmentation on [B, C, (T,) H, W]. No flip on pa-synth: left/right
    walking are distinct actions there."""
    if "shift" in ops:
        m = max(1, x.shape[-1] // 16)
        pad = F.pad(x.flatten(0, -3)[:, None], (m, m, m, m), mode="replicate")[:, 0]
        pad = pad.view(*x.shape[:-2], *pad.shape[-2:])
        dy, dx = rng.integers(0, 2 * m + 1, (2, x.shape[0]))
        h, w = x.shape[-2:]
        x = torch.stack([pad[i, ..., dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(len(x))])
    if "flip" in ops:
        flip = torch.from_numpy(rng.random(x.shape[0]) < 0.5).to(x.device)
        x = torch.where(flip.view(-1, *[1] * (x.dim() - 1)), x.flip(-1), x)
    return x


def _batch(videos: np.ndarray, idx: np.ndarray, kind: str, frames: int,
           rng: np.random.Generator | None) -> np.ndarray:
    """Training view: a random clip (video models) or a random frame (frame models)."""
    length = videos.shape[1]
    if kind == "frame":
        t = rng.integers(0, length, len(idx)) if rng is not None else np.full(len(idx), length // 2)
        return videos[idx, t].transpose(0, 3, 1, 2)  # [B, 3, H, W]
    starts = (rng.integers(0, length - frames + 1, len(idx)) if rng is not None
              else np.full(len(idx), (length - frames) // 2))
    clips = np.stack([videos[i, s:s + frames] for i, s in zip(idx, starts, strict=True)])
    return clips.transpose(0, 4, 1, 2, 3)  # [B, 3, T, H, W]


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
            batch_size: int = 64) -> np.ndarray:
    """Probabilities: sigmoid for multi-label, softmax otherwise. Video models: per clip,
    [N, K, C] (the caller averages clips per video). Frame models: averaged over `eval_frames`
    equidistant frames, [N, C]."""
    model.eval()
    kind = MODELS.get(spec.model).kind
    length = videos.shape[1]
    out = []

    def probs(logits: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(logits) if spec.task == "multilabel" else torch.softmax(logits, 1)

    if kind == "video":
        starts = clip_starts(length, spec.clip_frames, clips)
        for i in range(0, len(videos), batch_size):
            chunk = videos[i:i + batch_size]
            per_clip = []
            for s in starts:
                x = _to_float(chunk[:, s:s + spec.clip_frames].transpose(0, 4, 1, 2, 3),
                              spec.device)
                per_clip.append(probs(model(x)).cpu().numpy())
            out.append(np.stack(per_clip, axis=1))
        return np.concatenate(out)
    t = np.unique(np.linspace(0, length - 1, min(spec.eval_frames, length)).round().astype(int))
    for i in range(0, len(videos), batch_size):
        chunk = videos[i:i + batch_size][:, t]  # [b, k, H, W, 3]
        b, k = chunk.shape[:2]
        x = _to_float(chunk.reshape(b * k, *chunk.shape[2:]).transpose(0, 3, 1, 2), spec.device)
        prob = probs(model(x)).view(b, k, -1).mean(1)
        out.append(prob.cpu().numpy())
    return np.concatenate(out)


def _score(model: nn.Module, spec: FitSpec, videos: np.ndarray, targets: np.ndarray) -> float:
    """Validation score for early stopping: top-1, or cMAP for multi-label targets; video
    models are scored on their central clip."""
    pred = predict(model, spec, videos, clips=1)
    pred = pred if pred.ndim == 2 else pred[:, 0]
    if spec.task == "multiclass":
        return top1(pred, targets)
    return privacy_scores(pred, targets, [str(j) for j in range(targets.shape[1])]).cmap


def fit(spec: FitSpec, videos: np.ndarray, targets: np.ndarray,
        progress: Progress | None = None, stage: str = "train") -> tuple[nn.Module, int]:
    """Train a fresh model with early stopping; returns the best-on-validation model and the
    number of epochs run."""
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
    model = build_model(spec.model, spec.num_outputs, spec.input_size).to(spec.device)
    rank, world = rank_world()
    distributed = is_distributed()
    net = wrap_ddp(model, spec.device)
    opt = torch.optim.AdamW(model.parameters(), lr=sched.lr, weight_decay=sched.weight_decay)
    y_all = torch.from_numpy(targets.astype(np.int64 if spec.task == "multiclass"
                                            else np.float32))
    best, best_state, best_epoch, epoch = -np.inf, None, 0, 0
    for epoch in range(1, sched.max_epochs + 1):
        net.train()
        perm = rng.permutation(np.repeat(train, reps))
        for i in range(0, len(perm) - sched.batch_size // 2, sched.batch_size):
            idx = perm[i:i + sched.batch_size][rank::world]
            x = _to_float(_batch(videos, idx, kind, spec.clip_frames, rng), spec.device)
            x = _augment(x, spec.augment, rng)
            loss = _loss(net(x), y_all[idx].to(spec.device), spec.task)
            if not torch.isfinite(loss):
                raise PabenchError(f"{stage}: training loss became {loss.item()} at epoch {epoch}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if distributed:  # BatchNorm statistics drift per rank: take rank 0's everywhere
            for buf in model.buffers():
                dist.broadcast(buf, 0)
        score = _score(model, spec, videos[val], targets[val])
        if score > best:
            best, best_epoch, best_state = score, epoch, copy.deepcopy(model.state_dict())
        if progress:
            progress(stage, epoch, sched.max_epochs)
        if epoch >= sched.min_epochs and epoch - best_epoch >= sched.patience:
            break
    if progress:
        progress(stage, sched.max_epochs, sched.max_epochs)
    assert best_state is not None
    model.load_state_dict(best_state)
    return model, epoch
