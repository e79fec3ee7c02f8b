"""Metrics cross-checked against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, average_precision_score, f1_score

from pabench.metrics import bootstrap_ci, privacy_scores, relative_drop, top1, video_scores
from pabench.training import clip_starts

rng = np.random.default_rng(0)


def test_video_top1_averages_clip_softmax():
    clip_probs = rng.dirichlet(np.ones(5), size=(40, 3))
    labels = rng.integers(0, 5, 40)
    scores = video_scores(clip_probs)
    assert np.allclose(scores, clip_probs.mean(1))
    assert top1(scores, labels) == accuracy_score(labels, scores.argmax(1)) * 100
    # one confident wrong clip is outvoted by two right ones
    probs = np.array([[[0.1, 0.9], [0.6, 0.4], [0.6, 0.4]]])
    assert top1(video_scores(probs), np.array([0])) == 0.0  # mean is 0.43 vs 0.57
    probs = np.array([[[0.45, 0.55], [0.9, 0.1], [0.9, 0.1]]])
    assert top1(video_scores(probs), np.array([0])) == 100.0


def test_cmap_and_f1_match_sklearn_and_exclude_attributes_without_positives():
    y = rng.integers(0, 2, (200, 4)).astype(float)
    y[:, 3] = 0  # no positive: AP undefined
    p = np.clip(y * 0.3 + rng.random((200, 4)) * 0.7, 0, 1)
    s = privacy_scores(p, y, ["a", "b", "c", "d"])
    assert s.excluded == ["d"]
    expected_ap = average_precision_score(y[:, :3], p[:, :3], average="macro") * 100
    assert np.isclose(s.cmap, expected_ap)
    expected_f1 = f1_score(y[:, :3], p[:, :3] >= 0.5, average="macro") * 100
    assert np.isclose(s.f1, expected_f1)
    assert set(s.per_attribute) == {"a", "b", "c"}


def test_bootstrap_ci_brackets_the_estimate_and_narrows_with_n():
    def ci_width(n):
        labels = rng.integers(0, 2, n)
        scores = np.eye(2)[np.where(rng.random(n) < 0.8, labels, 1 - labels)]
        est = top1(scores, labels)
        lo, hi = bootstrap_ci(lambda idx: top1(scores[idx], labels[idx]), n, 300)
        assert lo <= est <= hi
        return hi - lo

    assert ci_width(2000) < ci_width(100)


def test_relative_drop_and_clip_starts():
    assert relative_drop(80.0, 60.0) == 0.25
    assert relative_drop(0.0, 10.0) is None
    assert list(clip_starts(16, 16, 10)) == [0]
    assert list(clip_starts(64, 16, 4)) == [0, 16, 32, 48]


def test_vectorised_average_precision_equals_scikit_learns() -> None:
    """The bootstrap's AP must be scikit-learn's, ties (saturated sigmoids) included."""
    from pabench.metrics import average_precisions

    rng = np.random.default_rng(0)
    for trial in range(200):
        n, a = int(rng.integers(2, 200)), int(rng.integers(1, 6))
        y = (rng.random((n, a)) < rng.random()).astype(np.float32)
        y[0], y[-1] = 1, 0
        s = rng.random((n, a)).astype(np.float32)
        if trial % 2:
            s = np.round(s * 4) / 4  # runs of tied scores
        if trial % 5 == 0:
            s[: n // 2] = 1.0
        expected = [average_precision_score(y[:, j], s[:, j]) for j in range(a)]
        np.testing.assert_allclose(average_precisions(y, s), expected, rtol=0, atol=1e-12)


def test_a_draw_missing_a_rare_tags_class_keeps_that_tags_full_set_value():
    """P-HVU has tags with a handful of positives: a draw without one of them is scored with
    that tag's full-test-set AP and F1, never NaN, and the other tags as drawn."""
    from pabench.metrics import cmap_fixed, per_attribute

    rng = np.random.default_rng(0)
    labels = np.zeros((200, 2), np.int8)
    labels[:100, 0] = 1
    labels[7, 1] = 1  # one positive only
    probs = np.clip(labels * 0.6 + rng.uniform(0, 0.5, labels.shape), 0, 1)
    full = per_attribute(probs, labels)
    draw = np.arange(8, 200)  # the rare tag's positive is not drawn
    assert np.isnan(cmap_fixed(probs[draw], labels[draw])[0])
    cmap, f1 = cmap_fixed(probs[draw], labels[draw], full)
    first = per_attribute(probs[draw], labels[draw])
    assert cmap == pytest.approx(100 * (first[0][0] + full[0][1]) / 2)
    assert f1 == pytest.approx(100 * (first[1][0] + full[1][1]) / 2)
    assert cmap_fixed(probs, labels, full) == cmap_fixed(probs, labels)
