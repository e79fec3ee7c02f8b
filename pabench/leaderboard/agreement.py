"""How alike the current protocols of one benchmark rank the entries they share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from pabench.leaderboard.tables import Table

MIN_SHARED = 4
"""Entries two tables must share before their rankings are compared: with three, a rank
correlation takes only a handful of values."""


@dataclass
class Agreement:
    """How alike the current protocols of one benchmark and preset rank the entries they
    share: the Spearman correlation of worst-case privacy cMAP, pair by pair. A protocol that
    reorders the same anonymizers measures something else than its neighbours (the
    raw-pretrained-attacker diagnostic does, by design)."""

    benchmark: str
    preset: str
    tables: list[Table]
    rho: list[list[float | None]]  # None: fewer than MIN_SHARED entries in common
    shared: list[list[int]]


def spearman(scores: dict[str, dict[str, float]]) -> tuple[list[list[float | None]],
                                                            list[list[int]]]:
    """Column -> row -> score, to the columns' pairwise Spearman correlations over the rows
    both have (None below MIN_SHARED) and those rows' counts."""
    frame = pd.DataFrame(scores)
    rho = frame.corr(method="spearman", min_periods=MIN_SHARED)
    present = frame.notna().astype(int)
    shared = present.T @ present
    return ([[None if pd.isna(v) else float(v) for v in row] for row in rho.to_numpy()],
            shared.to_numpy().tolist())


def rank_agreement(tables: Iterable[Table]) -> list[Agreement]:
    """One agreement matrix per benchmark and preset with at least two current tables, over
    the rows each table shows (unranked records left out, as from its ranks)."""
    groups: dict[tuple[str, str], list[Table]] = {}
    for t in tables:
        if t.current and t.shown:
            groups.setdefault((t.benchmark, t.preset), []).append(t)
    out = []
    for (benchmark, preset), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        rho, shared = spearman({t.id: {e.name: e.m.privacy_cmap for e in t.shown}
                                for t in group})
        out.append(Agreement(benchmark, preset, group, rho, shared))
    return out
