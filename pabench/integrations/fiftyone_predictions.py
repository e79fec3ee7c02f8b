"""A record's per-video predictions on its FiftyOne dataset, beside the labels they were
scored against (`pabench datasets view --predictions`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pabench.errors import PabenchError
from pabench.integrations.fiftyone_view import import_fiftyone
from pabench.io import printable

PREDICTION_COLUMNS = {"side", "dataset", "split", "video_id", "role", "model", "seed",
                      "classes", "scores"}


def read_predictions(path: Path) -> pd.DataFrame:
    """A `pabench evaluate --save-predictions` file (or the record `.json` it was written
    beside), its columns checked (a plain parquet table: reading it runs no code)."""
    if path.suffix == ".json":
        from pabench.evaluation.store import predictions_path

        record, path = path, predictions_path(path)
        if not path.is_file():
            raise PabenchError(f"{record}: no predictions beside this record ({path.name}); "
                               "evaluate again with --save-predictions")
    try:
        table = pd.read_parquet(path)
    except FileNotFoundError:
        raise PabenchError(f"{path}: file not found (write one with `pabench evaluate "
                           "--save-predictions`)") from None
    except Exception as e:  # pyarrow raises several kinds for a file that is not parquet
        raise PabenchError(f"{path}: not a parquet predictions file ({type(e).__name__}: "
                           f"{printable(str(e), 120)})") from None
    missing = PREDICTION_COLUMNS - set(table.columns)
    if missing:
        raise PabenchError(f"{path}: not a predictions file (columns {sorted(missing)} missing)")
    return table


def add_predictions(name: str, table: pd.DataFrame, source: Path) -> dict[str, int]:
    """Put a record's per-video predictions on the FiftyOne dataset `name`, next to the labels
    they were scored against: `action_prediction` (the target's class probabilities averaged
    over seeds) with FiftyOne's evaluation against `action` (eval key `eval_action`), and per
    attacker architecture `attack_<arch>` (each attribute with its probability, seeds
    averaged; those at 0.5 or above marked as predicted). The models saw anonymized clips,
    so on a grouped dataset they go on the `anonymized` slice. Returns the samples labelled
    per field."""
    fo = import_fiftyone()
    dataset = fo.load_dataset(name)
    meta = dataset.info.get("pabench", {})
    rows = table[table["dataset"] == meta.get("dataset")]
    if rows.empty:
        found = ", ".join(sorted(set(table["dataset"].astype(str))))
        raise PabenchError(f"{source}: no predictions for dataset {meta.get('dataset')!r} "
                           f"(the file has {found})")
    view = dataset.select_group_slices("anonymized") if dataset.media_type == "group" else dataset
    by_key = {(tags[0] if tags else "", str(vid)): sid for sid, tags, vid in
              zip(*view.values(["id", "tags", "video_id"]), strict=True)}
    counts: dict[str, int] = {}
    for (role, model), group in rows.groupby(["role", "model"], sort=True):
        field = "action_prediction" if role == "target" else f"attack_{model}"
        values = {}
        for (split, vid), per_seed in group.groupby(["split", "video_id"], sort=False):
            sid = by_key.get((str(split), str(vid)))
            if sid is None:
                continue
            scores = np.mean(np.stack([np.asarray(x, np.float32) for x in per_seed["scores"]]),
                             axis=0)
            classes = list(per_seed["classes"].iloc[0])
            if role == "target":
                best = int(scores.argmax())
                values[sid] = fo.Classification(label=classes[best],
                                                confidence=float(scores[best]))
            else:
                values[sid] = fo.Classifications(classifications=[
                    fo.Classification(label=c, confidence=float(p), tags=["predicted"]
                                      if p >= 0.5 else []) for c, p in zip(classes, scores,
                                                                            strict=True)])
        if not values:
            continue
        view.select(list(values)).set_values(field, values, key_field="id")
        counts[field] = len(values)
    if not counts:
        raise PabenchError(f"{source}: none of its videos is in FiftyOne dataset {name} "
                           "(predictions of another build of this dataset?)")
    truth = dataset.get_field("action") if dataset.has_sample_field("action") else None
    if "action_prediction" in counts and getattr(truth, "document_type", None) is fo.Classification:
        if "eval_action" in dataset.list_evaluations():
            dataset.delete_evaluation("eval_action")  # an earlier record's
        view.exists("action_prediction").evaluate_classifications(
            "action_prediction", gt_field="action", eval_key="eval_action")
    return counts
