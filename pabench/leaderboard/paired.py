"""Paired comparisons of neighbours and the tie groups they give (protocols with `scoring: 2`).

Two entries' bootstrap intervals overlap even where one beats the other on nearly every test
video: each interval carries the variance of the test set, which both entries share. A paired
bootstrap resamples the same videos and seeds for both entries in each draw and looks at the
difference, so what the two share cancels. Each draw takes the worst attacker of each entry
inside the draw, as the records' own intervals do, and stretches each seed-resampled mean as
scoring 2 does (`pabench.metrics.seed_stretch`).

Ranks: walking down a ranked table in headline order (worst-case privacy cMAP, best first), an
entry joins the group of the entry above it when the 95% interval of their paired privacy
difference contains 0; every entry of a group shows the group's span ("2–4"). A table ranks this
way only when every ranked entry has outcomes scored on the same videos, seeds and attackers;
otherwise (every record made before scoring 2) it keeps the interval-overlap ranks
(`pabench.leaderboard.ranking.tie_ranks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pabench.metrics import SortedScores, action_score, percentile_ci, seed_stretch
from pabench.records import Paired
from pabench.records.outcomes import Outcomes, outcomes_path, read_outcomes

if TYPE_CHECKING:
    from pabench.leaderboard.tables import Entry

PAIRED_RESAMPLES = 300
"""Draws of each paired bootstrap, as many as a record's own intervals take."""


def _action(o: Outcomes, idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each seed's action score on the videos `idx` (drawn `counts` times each): top-1 from
    the stored classes, or cMAP."""
    if o.multilabel:
        names = [str(i) for i in range(o.action_labels.shape[1])]
        return np.array([action_score(pr[idx].astype(np.float32), o.action_labels[idx], names)
                         for pr in o.action])
    return (o.action == o.action_labels) @ counts / counts.sum() * 100


def _worst(per: np.ndarray, picks: np.ndarray | None) -> float:
    """The worst attacker's cMAP from each attacker's per-seed cMAPs [M, S], its seeds
    resampled by `picks` (None: every seed once)."""
    if picks is None:
        return float(per.mean(axis=1).max())
    return float(max(seed_stretch(row, picks) for row in per))


def paired(a: Outcomes, b: Outcomes, resamples: int = PAIRED_RESAMPLES) -> Paired:
    """`a` less `b`, scored on the same test videos and seeds (`Outcomes.pairs_with`): the
    difference of the headline scores and its paired-bootstrap 95% interval. Privacy is each
    model's cMAP over the attributes, NaN (a dropped draw) where one has a single class among
    the drawn videos, as `pabench.metrics.cmap_fixed` scores it."""
    if not a.pairs_with(b):
        raise ValueError("paired comparison of outcomes scored on different videos or seeds")
    rng = np.random.default_rng(0)
    n_s, n_a, n_p = len(a.seeds), len(a.action_labels), len(a.privacy_labels)
    m, y = len(a.attackers), a.privacy_labels > 0
    both = np.concatenate([a.privacy, b.privacy]).astype(np.float32)  # a's attackers first
    columns = SortedScores(np.tile(y, 2 * m * n_s),
                           both.transpose(2, 0, 1, 3).reshape(n_p, -1))

    def action(idx: np.ndarray, picks: np.ndarray | None) -> float:
        counts = np.bincount(idx, minlength=n_a)
        pa, pb = _action(a, idx, counts), _action(b, idx, counts)
        return float(pa.mean() - pb.mean() if picks is None
                     else seed_stretch(pa, picks) - seed_stretch(pb, picks))

    def privacy(idx: np.ndarray, picks: np.ndarray | None) -> float:
        counts = np.bincount(idx, minlength=n_p)
        positives = counts @ y
        if not ((positives > 0) & (positives < len(idx))).all():
            return float("nan")
        per = columns.average_precisions(counts).reshape(2 * m, n_s, -1).mean(axis=-1) * 100
        return _worst(per[:m], picks) - _worst(per[m:], picks)

    draws = np.full((resamples, 2), np.nan)
    for i in range(resamples):
        ia, ip = rng.integers(0, n_a, n_a), rng.integers(0, n_p, n_p)
        ks = rng.integers(0, n_s, n_s)
        draws[i] = action(ia, ks), privacy(ip, ks)
    return Paired(action=action(np.arange(n_a), None), action_ci=percentile_ci(draws[:, 0]),
                  privacy_cmap=privacy(np.arange(n_p), None),
                  privacy_cmap_ci=percentile_ci(draws[:, 1]))


def tie_groups(gaps: list[Paired]) -> list[tuple[int, int]]:
    """Rank spans of entries in headline order, from each entry's paired privacy difference
    to the entry above it (`gaps[i]`: entry i + 1 less entry i): an interval holding 0 ties
    the entry to the group above."""
    starts = [0] + [i + 1 for i, g in enumerate(gaps)
                    if not g.privacy_cmap_ci[0] <= 0.0 <= g.privacy_cmap_ci[1]]
    ends = [*(s - 1 for s in starts[1:]), len(gaps)]
    return [(s + 1, e + 1) for s, e in zip(starts, ends, strict=True) for _ in range(s, e + 1)]


def columns(gap: Paired | None) -> dict[str, float | None]:
    """A difference to the entry above as a table download's columns (empty where none)."""
    keys = [f"vs_previous_{k}" for k in ("action", "action_ci_lo", "action_ci_hi",
                                         "privacy_cmap", "privacy_cmap_ci_lo",
                                         "privacy_cmap_ci_hi")]
    if gap is None:
        return dict.fromkeys(keys)
    return dict(zip(keys, (gap.action, *gap.action_ci, gap.privacy_cmap, *gap.privacy_cmap_ci),
                    strict=True))


def rank_paired(ranked: list[Entry]) -> bool:
    """Set each entry's paired difference to the one above it (`vs_previous`) and its tie
    group's rank span, where every entry has outcomes that pair with each other's; returns
    whether it did (otherwise nothing is set)."""
    if len(ranked) < 2 or any(e.record.outcomes is None for e in ranked):
        return False
    loaded = [read_outcomes(outcomes_path(e.path), e.record.outcomes or "", e.path)
              for e in ranked]
    if not all(o.pairs_with(loaded[0]) for o in loaded):
        return False
    gaps = [paired(lower, upper) for upper, lower in zip(loaded, loaded[1:], strict=False)]
    for e, gap in zip(ranked[1:], gaps, strict=True):
        e.vs_previous = gap
    for e, rank in zip(ranked, tie_groups(gaps), strict=True):
        e.rank = rank
    return True
