"""Does the submission treat test clips like training clips? A classifier must not tell them
apart after anonymization.

On pa-synth, training and test splits come from one generator, so their anonymized copies are
alike unless the submission recognises test clips (public test clips can be memorised) and
treats them differently. A frame model is trained to separate anonymized privacy-training clips
from anonymized privacy-test clips on one half of each and scored (ROC AUC) on the other half;
an AUC above `THRESHOLD` fails the check and the record is not ranked.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pabench.data.clipset import ClipSet
from pabench.evaluation.data import Run
from pabench.evaluation.fit import fit_predict
from pabench.io import digest
from pabench.metrics import bootstrap_ci
from pabench.records import Consistency

MODEL = "tiny2d"
THRESHOLD = 65.0  # AUC in percent: chance is 50; with ~2 x 100 held-out clips its sd is ~4


def _labelled(train: ClipSet, test: ClipSet, pick_train: np.ndarray, pick_test: np.ndarray,
              part: str) -> ClipSet:
    """Clips of both splits labelled 0 (from training) or 1 (from test)."""
    videos = np.concatenate([train.videos[pick_train], test.videos[pick_test]])
    y = np.r_[np.zeros(len(pick_train), np.int64), np.ones(len(pick_test), np.int64)]
    fp = digest("consistency", part, train.fingerprint, test.fingerprint, pick_train.tolist(),
                pick_test.tolist())
    return replace(train, name=f"{train.name}+{test.name}", split=part, videos=videos,
                   video_ids=[*np.asarray(train.video_ids)[pick_train].tolist(),
                              *np.asarray(test.video_ids)[pick_test].tolist()],
                   fingerprint=fp, action=y, action_classes=("train", "test"),
                   attributes=None, attribute_names=(), frame_attributes=None,
                   attribute_map={}, label_groups={})


def consistency(run: Run, name: str, train: ClipSet, test: ClipSet) -> Consistency:
    """Train the separating classifier on half of each anonymized split, score the rest."""
    rng = np.random.default_rng(0)
    n = min(len(train), len(test))
    a, b = rng.permutation(len(train))[:n], rng.permutation(len(test))[:n]
    half = n // 2
    fit_set = _labelled(train, test, a[:half], b[:half], "fit")
    held = _labelled(train, test, a[half:], b[half:], "held-out")
    pred, _ = fit_predict(run, MODEL, "action", fit_set, held, 0,
                          f"{name}: consistency check {MODEL}")
    p_test = (pred if pred.ndim == 2 else pred.mean(axis=1))[:, 1]
    y = held.action
    assert y is not None

    from sklearn.metrics import roc_auc_score  # seconds: only when the check runs

    def auc(idx: np.ndarray) -> float:
        yy = y[idx]
        return float(roc_auc_score(yy, p_test[idx]) * 100) if 0 < yy.sum() < len(yy) else np.nan

    value = auc(np.arange(len(y)))
    return Consistency(model=MODEL, auc=value, auc_ci=bootstrap_ci(auc, len(y)),
                       threshold=THRESHOLD, passed=value <= THRESHOLD)
