"""Seconds of a record's bootstrap (`_joint_ci`: 300 draws, max over attackers inside each)
with scikit-learn's average precision against the vectorised one, in one run.

    python benchmarks/bench_scoring.py [--videos 208] [--attributes 5] [--attackers 3]

Predictions are random, shaped like a pa-synth tiny record (3 seeds per model, 8 actions);
both paths must give the same intervals, which the script checks before printing the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from unittest import mock

import numpy as np
from sklearn.metrics import average_precision_score

from pabench.evaluation import score


def sklearn_aps(labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    return np.array([average_precision_score(labels[:, j], scores[:, j])
                     for j in range(labels.shape[1])])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--videos", type=int, default=208)
    ap.add_argument("--attributes", type=int, default=5)
    ap.add_argument("--attackers", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n, a, seeds = args.videos, args.attributes, 3
    labels = rng.integers(0, 8, n)
    action = [rng.dirichlet(np.ones(8), n) for _ in range(seeds)]
    y = (rng.random((n, a)) < 0.4).astype(np.float32)
    attackers = {f"attacker{i}": [rng.random((n, a)).astype(np.float32) for _ in range(seeds)]
                 for i in range(args.attackers)}
    names = [str(c) for c in range(8)]
    seconds, cis = {}, {}
    for name, impl in (("scikit-learn", sklearn_aps), ("vectorised", None)):
        with (mock.patch("pabench.metrics.average_precisions", impl) if impl
              else contextlib.nullcontext()):
            start = time.perf_counter()
            cis[name] = score._joint_ci(action, labels, names, attackers, y)
            seconds[name] = time.perf_counter() - start
    assert np.allclose(cis["scikit-learn"], cis["vectorised"], atol=1e-9), cis
    for name, s in seconds.items():
        print(f"{name:14s} {s:7.3f} s per bootstrap ({score.BOOTSTRAP_RESAMPLES} draws)")
    print(f"ratio x{seconds['scikit-learn'] / seconds['vectorised']:.1f}; a record runs two "
          "(the anonymizer's and the raw reference's)")


if __name__ == "__main__":
    main()
