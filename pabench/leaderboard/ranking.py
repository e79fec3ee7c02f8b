"""Ranking one table: the Pareto front of action against privacy, and rank ranges that tie
entries the bootstrap cannot tell apart."""

from __future__ import annotations


def pareto_flags(points: list[tuple[float, float]]) -> list[bool]:
    """(action, privacy cMAP) -> optimal? Higher action and lower privacy are better.

    A point is dominated by one at least as good on both axes and better on one (ties are not
    dominated). One sweep from the best action down, O(n log n): thousands of entries are fine.
    """
    order = sorted(range(len(points)), key=lambda i: -points[i][0])
    flags = [True] * len(points)
    best_above = float("inf")  # lowest privacy among strictly higher action
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and points[order[j]][0] == points[order[i]][0]:
            j += 1
        group = order[i:j]
        lowest = min(points[k][1] for k in group)
        for k in group:
            p = points[k][1]
            flags[k] = not (best_above <= p or lowest < p)
        best_above = min(best_above, lowest)
        i = j
    return flags


def tie_ranks(scores: list[float], cis: list[tuple[float, float]]) -> list[tuple[int, int]]:
    """Rank ranges for lower-is-better scores: an entry ranks from the best to the worst
    position of the entries whose CIs overlap its own (equal scores tie too), so entries the
    bootstrap cannot tell apart share a range instead of an order that noise decides."""
    ranks = []
    for i, (lo, hi) in enumerate(cis):
        group = [j for j, (lo2, hi2) in enumerate(cis)
                 if j == i or scores[j] == scores[i] or (lo2 <= hi and lo <= hi2)]
        best = min(scores[j] for j in group)
        worst = max(scores[j] for j in group)
        ranks.append((1 + sum(s < best for s in scores), sum(s <= worst for s in scores)))
    return ranks
