"""Storing an evaluation: the sample strip and the record, apart from computing them."""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from pabench.data.clipset import ClipSet
from pabench.errors import PabenchError
from pabench.evaluation.score import Predictions
from pabench.io import atomic_write_bytes
from pabench.records import Record, check_replace, write_record
from pabench.records.outcomes import outcomes_path


@dataclass
class Evaluation:
    """A computed record and its sample strip (raw frames over anonymized frames)."""

    record: Record
    sample: np.ndarray  # uint8 [H, W, 3]
    predictions: Predictions | None = None
    outcomes: bytes | None = None  # the file `record.outcomes` names (scoring 2)


def sample_strip(raw: ClipSet, anon: ClipSet, n: int = 3) -> np.ndarray:
    """Four frames of `n` test videos, raw above anonymized, scaled up to about 128 px."""
    t = np.linspace(0, raw.videos.shape[1] - 1, 4).round().astype(int)
    rows = [np.concatenate([np.concatenate(list(v.videos[i, t]), 1) for i in range(n)], 1)
            for v in (raw, anon)]
    scale = max(1, 128 // raw.videos.shape[2])
    return np.concatenate(rows, 0).repeat(scale, axis=0).repeat(scale, axis=1)


def record_path(record: Record, output_dir: Path) -> Path:
    """Named by the entry id (benchmark, preset, protocol and version, name): unambiguous."""
    return Path(output_dir) / f"{record.entry_id}.json"


def predictions_path(record_file: Path) -> Path:
    return record_file.with_name(f"{record_file.stem}.predictions.parquet")


def store(evaluation: Evaluation, output_dir: Path, *, replace: bool = False,
          save_predictions: bool = False) -> tuple[Path, bool]:
    """Write the record, the sample PNG, its outcomes (scoring 2: `NAME.outcomes.npz`) and
    with `save_predictions` the per-video predictions beside it (`NAME.predictions.parquet`);
    an existing record of another submission is only replaced with `replace` (see
    `write_record`), and then nothing is written. Returns the path and whether it replaced
    one."""
    record = evaluation.record.model_copy(deep=True)
    path = record_path(record, output_dir)
    sample = Path("samples") / f"{path.stem}.png"
    png = io.BytesIO()
    Image.fromarray(evaluation.sample).save(png, format="PNG")
    record.samples = [sample.as_posix()]
    if save_predictions and evaluation.predictions is None:
        raise PabenchError(f"{path}: this evaluation kept no predictions to save")
    if (evaluation.outcomes is None) != (record.outcomes is None) or (
            evaluation.outcomes is not None
            and hashlib.sha256(evaluation.outcomes).hexdigest() != record.outcomes):
        raise PabenchError(f"{path}: the record does not name the outcomes kept with it")
    check_replace(record, path, replace=replace)  # refuses before anything is written
    if evaluation.outcomes is not None:  # first, so a record never names a missing file
        atomic_write_bytes(outcomes_path(path), evaluation.outcomes)
    replaced = write_record(record, path, replace=replace)
    atomic_write_bytes(Path(output_dir) / sample, png.getvalue())
    if save_predictions and evaluation.predictions is not None:
        buffer = io.BytesIO()
        evaluation.predictions.table().to_parquet(buffer, index=False)
        atomic_write_bytes(predictions_path(path), buffer.getvalue())
    evaluation.record.samples = record.samples
    return path, replaced
