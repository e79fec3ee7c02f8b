"""Train one fresh model (target or attacker) and predict the test set, both cached."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np
import torch

from pabench.data.clipset import ClipSet
from pabench.errors import PabenchError
from pabench.evaluation.data import Run
from pabench.io import atomic_write, digest
from pabench.models.weights import weights_sha256
from pabench.runtime import is_rank0, numerics
from pabench.training import FitSpec, Trace, build_for, fit, predict, prepare

FIT_CODE_VERSION = "fit-v3"  # v3: channels_last layouts (rounding moves)
LOADER_WORKERS = 4  # real data on a GPU: processes per rank gathering batches ahead
"""Bumped whenever training code changes results; with the protocol version in every fit key,
no cache ever serves numbers from other code or another protocol version (a version that only
adds attackers declares the one whose models it shares: `ProtocolSpec.models_of`). The
protocol id is left out on purpose: protocols sharing a training set and schedule share the
model."""


@dataclass(frozen=True)
class FitPlan:
    """One model to train and score, and where its weights and test predictions are cached."""

    spec: FitSpec
    labels: np.ndarray
    weights_path: Path
    pred_path: Path


def plan(run: Run, model: str, target: Literal["action", "attributes"], train: ClipSet,
         test: ClipSet, seed: int, stage: str) -> FitPlan:
    """Weights are cached by everything that determines them (protocols sharing a training set
    share the model) and predictions by weights + test set."""
    p = run.protocol
    y = train.action if target == "action" else train.attributes
    if y is None:
        raise PabenchError(f"{train.name}/{train.split}: has no {target} labels for {stage}")
    task = "multilabel" if y.ndim == 2 else "multiclass"
    n_out = len(train.action_classes if target == "action" else train.attribute_names)
    schedule = p.schedule_for(target)
    weights = p.weights_for(model, target)
    spec = FitSpec(model=model, task=task, num_outputs=n_out,  # type: ignore[arg-type]
                   clip_frames=run.frames, input_size=run.size, schedule=schedule,
                   augment=p.augment, seed=seed, device=run.device, standardize=p.standardize,
                   # gathering from a store larger than memory runs behind a GPU step; it
                   # moves no number (tests/test_training_path.py), so it is not in the key
                   loader_workers=LOADER_WORKERS if run.benchmark == "real"
                   and torch.device(run.device).type == "cuda" else 0,
                   weights=weights, weights_dir=run.weights_dir)
    # where and how it computes moves the numbers too, as does the autocast dtype
    where = (*numerics(run.device, run.threads), str(spec.amp_dtype))
    fit_key = digest(FIT_CODE_VERSION, p.models_version, model, task, train.fingerprint, seed,
                     schedule.model_dump(), p.augment, run.frames, run.size, where,
                     # 2: the shift augmentation moves only the departure from the mean image
                     *(("standardize", 2) if p.standardize else ()),
                     # only a protocol naming initial weights keys them (name and file)
                     *(("weights", weights, weights_sha256(weights, run.weights_dir))
                       if weights else ()))[:32]
    pred_key = digest(fit_key, test.fingerprint, p.clip.test_clips)[:32]
    return FitPlan(spec, y, run.work_dir / "models" / f"{fit_key}.pt",
                   run.work_dir / "predictions" / f"{pred_key}.npz")


def _traces(text: str) -> list[Trace]:
    return [Trace(**t) for t in json.loads(text)]


def _dump(traces: list[Trace]) -> str:
    return json.dumps([asdict(t) for t in traces])


def cached_prediction(fp: FitPlan) -> tuple[np.ndarray, list[Trace]] | None:
    """The cached test predictions and training traces, or None (a corrupt file is removed)."""
    try:
        with np.load(fp.pred_path, allow_pickle=False) as cached:
            return cached["pred"], _traces(str(cached["traces"]))
    except FileNotFoundError:
        return None
    except Exception:  # truncated or foreign: np.load and torch.load raise many types
        fp.pred_path.unlink(missing_ok=True)  # a cache is ours to rebuild, never a failed run
        return None


def fit_predict(run: Run, model: str, target: Literal["action", "attributes"], train: ClipSet,
                test: ClipSet, seed: int, stage: str) -> tuple[np.ndarray, list[Trace]]:
    """Test predictions of one model trained on `train`'s action or attribute labels (multi-
    label when they are multi-hot), and its training traces; a re-run or a killed run never
    retrains a finished model."""
    fp = plan(run, model, target, train, test, seed, stage)
    if (cached := cached_prediction(fp)) is not None:
        return cached
    try:
        state = torch.load(fp.weights_path, map_location=run.device, weights_only=True)
        net = prepare(build_for(fp.spec), run.device)
        net.load_state_dict(state["weights"])
        traces = _traces(state["traces"])
    except FileNotFoundError:
        net, traces = _train(run, fp, train, stage)
    except Exception:  # as in cached_prediction
        fp.weights_path.unlink(missing_ok=True)
        net, traces = _train(run, fp, train, stage)
    start = time.perf_counter()
    pred = predict(net, fp.spec, test.videos, clips=run.protocol.clip.test_clips)
    run.tick("compute_predict", start)
    _save(fp.pred_path, lambda f: np.savez(f, pred=pred, traces=np.array(_dump(traces))))
    return pred, traces


def _train(run: Run, fp: FitPlan, train: ClipSet, stage: str
           ) -> tuple[torch.nn.Module, list[Trace]]:
    start = time.perf_counter()
    net, traces = fit(fp.spec, train.videos, fp.labels, progress=run.progress, stage=stage)
    run.tick("compute_train", start)
    payload = {"weights": net.state_dict(), "traces": _dump(traces)}
    _save(fp.weights_path, lambda f: torch.save(payload, f))
    return net, traces


def _save(path: Path, save: Callable[[BinaryIO], None]) -> None:
    """Rank 0 writes; through an open file, since np.savez renames paths lacking `.npz`."""
    if is_rank0():
        atomic_write(path, lambda tmp: _write_to(tmp, save))


def _write_to(tmp: Path, save: Callable[[BinaryIO], None]) -> None:
    with open(tmp, "wb") as f:
        save(f)


def align_attributes(train: ClipSet, test: ClipSet) -> Callable[[np.ndarray], np.ndarray]:
    """Map attacker outputs (train label space) to the test attributes: same names, or, as in
    VITA for VISPR -> PA-HMDB51, the max over the train attributes that imply a test one."""
    cols: list[list[int]] = []
    for attr in test.attribute_names:
        sources = [attr] if attr in train.attribute_names else test.attribute_map.get(attr, [])
        if not sources or any(s not in train.attribute_names for s in sources):
            raise PabenchError(
                f"{test.name}: attribute '{attr}' is not labelled in {train.name} "
                f"(trainable: {', '.join(train.attribute_names)})"
            )
        cols.append([train.attribute_names.index(s) for s in sources])
    return lambda probs: np.stack([probs[:, c].max(axis=1) for c in cols], axis=1)
