"""Metrics of the field: video-level top-1 (or, for multi-label actions such as P-HVU's, action
cMAP), privacy cMAP (macro AP), mean F1 at p=0.5, bootstrap CIs.

Scores are percentages (0-100). cMAP follows the authors' code (scikit-learn average precision
per attribute, macro-averaged); F1 thresholds sigmoid *probabilities* at 0.5 (the SPAct-lineage
code thresholds raw logits at 0.5; pabench does not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def video_scores(clip_probs: np.ndarray) -> np.ndarray:
    """Average per-clip probabilities (softmax, or sigmoid when multi-label) over a video's
    clips: [N, K, C] -> [N, C]."""
    return clip_probs.mean(axis=1)


def top1(scores: np.ndarray, labels: np.ndarray) -> float:
    return float((scores.argmax(axis=1) == labels).mean() * 100)


@dataclass
class PrivacyScores:
    cmap: float
    f1: float
    per_attribute: dict[str, dict[str, float]]
    excluded: list[str]


def scorable(labels: np.ndarray) -> np.ndarray:
    """Which attributes have both classes among these videos: AP is undefined without a
    positive and a constant 100 without a negative, so neither may count."""
    pos = labels.sum(axis=0)
    return (pos > 0) & (pos < len(labels))


def privacy_scores(probs: np.ndarray, labels: np.ndarray, names: list[str]) -> PrivacyScores:
    """cMAP and mean F1 over attributes; attributes with one class only among the test videos
    are excluded (see `scorable`) and listed."""
    from sklearn.metrics import average_precision_score, f1_score  # seconds: only when scoring

    per: dict[str, dict[str, float]] = {}
    excluded = []
    ok = scorable(labels)
    for j, name in enumerate(names):
        y = labels[:, j]
        if not ok[j]:
            excluded.append(name)
            continue
        ap = average_precision_score(y, probs[:, j])
        f1 = f1_score(y, probs[:, j] >= 0.5, zero_division=0.0)
        per[name] = {"ap": float(ap * 100), "f1": float(f1 * 100)}
    if not per:
        return PrivacyScores(float("nan"), float("nan"), per, excluded)
    cmap = float(np.mean([v["ap"] for v in per.values()]))
    f1 = float(np.mean([v["f1"] for v in per.values()]))
    return PrivacyScores(cmap, f1, per, excluded)


def action_score(probs: np.ndarray, labels: np.ndarray, names: list[str]) -> float:
    """Top-1 for single-label actions (labels [N]); for multi-label ones (multi-hot [N, C]) the
    cMAP over action classes with a positive, as SPAct reports P-HVU actions."""
    if labels.ndim == 2:
        return privacy_scores(probs, labels, names).cmap
    return top1(probs, labels)


def bootstrap_ci(
    stat, n: int, resamples: int = 300, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float]:
    """Percentile bootstrap over test videos: `stat(indices) -> float`, NaN draws dropped."""
    rng = np.random.default_rng(seed)
    return percentile_ci(np.array([stat(rng.integers(0, n, n)) for _ in range(resamples)]),
                         alpha)


CI_ALPHA = 0.05
"""Bootstrap intervals are central 1 - CI_ALPHA (95%) intervals; the site states the level."""


def percentile_ci(values: np.ndarray, alpha: float = CI_ALPHA) -> tuple[float, float]:
    """The central 1 - alpha interval of bootstrap draws, NaN draws dropped."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (float("nan"), float("nan"))
    lo, hi = np.percentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return (float(lo), float(hi))


def seed_stretch(per_seed: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The mean of the seeds `picks` resampled (with replacement) from `per_seed` [n, ...],
    moved away from the all-seed mean by sqrt(n/(n-1)), clipped to the score range [0, 100].

    A mean of n values drawn out of n has (n-1)/n of the variance of the seed mean it stands
    for (3 seeds: the SD a fifth too small); the stretch restores it. One seed has no seed
    term: its score is returned as it is."""
    n = len(per_seed)
    full = per_seed.mean(axis=0)
    if n == 1:
        return full
    drawn = per_seed[picks].mean(axis=0)
    return np.clip(full + np.sqrt(n / (n - 1)) * (drawn - full), 0.0, 100.0)


def average_precisions(labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """scikit-learn's `average_precision_score` of every column of [N, A] at once (the sum
    over distinct score thresholds of recall gained times precision, ties as one threshold).

    The bootstrap scores thousands of resampled test sets per record; scikit-learn's input
    checks made that about a fifth of a GPU evaluation. Equal to it to rounding (tested)."""
    order = np.argsort(-scores, axis=0, kind="stable")
    s = np.take_along_axis(scores, order, axis=0)
    tp = np.cumsum(np.take_along_axis(labels > 0, order, axis=0), axis=0, dtype=np.float64)
    end = np.ones_like(s, dtype=bool)
    end[:-1] = s[:-1] != s[1:]  # the last video of each run of tied scores closes a threshold
    closed = np.where(end, tp, 0.0)
    before = np.zeros_like(tp)  # true positives at the previous threshold
    before[1:] = np.maximum.accumulate(closed, axis=0)[:-1]
    rank = np.arange(1, len(s) + 1, dtype=np.float64)[:, None]
    gained = np.where(end, (tp - before) * tp / rank, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return gained.sum(axis=0) / tp[-1]


class SortedScores:
    """Columns of scores [N, K] and their labels sorted once, so that the average precision of
    every column on a bootstrap draw comes from the draw's count of each video
    (`average_precisions` of the resampled rows, to rounding, without sorting again: a video
    drawn twice is a tie of itself, which a threshold counts whole as it counts any tie)."""

    def __init__(self, labels: np.ndarray, scores: np.ndarray) -> None:
        self.order = np.argsort(-scores, axis=0, kind="stable")
        s = np.take_along_axis(scores, self.order, axis=0)
        self.end = np.ones_like(s, dtype=bool)
        self.end[:-1] = s[:-1] != s[1:]
        self.positive = np.take_along_axis(labels > 0, self.order, axis=0)

    def average_precisions(self, counts: np.ndarray) -> np.ndarray:
        """AP of every column on the videos drawn `counts` [N] times each."""
        w = counts[self.order].astype(np.float64)
        tp = np.cumsum(w * self.positive, axis=0)
        rank = np.cumsum(w, axis=0)
        before = np.zeros_like(tp)
        before[1:] = np.maximum.accumulate(np.where(self.end, tp, 0.0), axis=0)[:-1]
        gained = np.divide((tp - before) * tp, rank, out=np.zeros_like(tp),
                           where=self.end & (rank > 0))
        with np.errstate(invalid="ignore", divide="ignore"):
            return gained.sum(axis=0) / tp[-1]


def per_attribute(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each attribute's AP and F1 (at p = 0.5), as fractions; AP is NaN for an attribute with
    a single class among these videos."""
    aps = average_precisions(labels, probs)
    pred = probs >= 0.5
    tp = (pred & (labels > 0)).sum(0)
    denom = pred.sum(0) + (labels > 0).sum(0)
    return aps, np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)


def cmap_fixed(probs: np.ndarray, labels: np.ndarray,
               full: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[float, float]:
    """cMAP and mean F1 over exactly these attributes: a bootstrap draw must not silently
    score another attribute set than the full test set. An attribute with a single class among
    the drawn videos takes its value on the full test set from `full` (`per_attribute` there),
    or makes the draw NaN without it: a tag with a handful of positives (P-HVU has hundreds)
    misses from almost every draw, and no draw would score them all."""
    ok = scorable(labels)
    if not ok.all() and full is None:
        return float("nan"), float("nan")
    aps, f1 = per_attribute(probs, labels)
    if full is not None and not ok.all():
        aps, f1 = np.where(ok, aps, full[0]), np.where(ok, f1, full[1])
    return float(np.mean(aps) * 100), float(np.mean(f1) * 100)


def base_rate_cmap(labels: np.ndarray) -> float:
    """The cMAP of an attacker that knows nothing: each attribute's AP is its positive rate."""
    return float(labels.mean(axis=0).mean() * 100)


def relative_drop(raw: float, anonymized: float) -> float | None:
    """(raw - anonymized) / raw: positive when the anonymizer lowers the score."""
    if not np.isfinite(raw) or raw == 0:
        return None
    return float((raw - anonymized) / raw)
