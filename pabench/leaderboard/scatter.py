"""Geometry of the privacy-vs-action trade-off plot, computed here so the SVG needs no script.

As in the papers' figures: x = worst-case privacy cMAP (left is more private), y = action top-1
(up is more useful), dashed lines at the raw-data reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pabench.leaderboard.tables import Table

WIDTH, HEIGHT = 460, 340
LEFT, RIGHT, TOP, BOTTOM = 56, 18, 18, 48
LABEL_CHARS = 22


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    name: str
    label: str
    tooltip: str
    pareto: bool
    reference: bool
    label_left: bool


@dataclass(frozen=True)
class Tick:
    pos: float
    text: str


@dataclass(frozen=True)
class Scatter:
    width: int
    height: int
    left: int
    right: float
    top: int
    bottom: float
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    points: list[Point]
    front: str  # SVG polyline points of the Pareto front
    ref_x: float | None
    ref_y: float | None


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _axis(values: list[float]) -> tuple[float, float, float]:
    """Round (lo, hi) out to tick multiples, clamped to the 0-100 percentage range."""
    lo, hi = min(values), max(values)
    pad = max((hi - lo) * 0.08, 1.0)
    lo, hi = max(lo - pad, 0.0), min(hi + pad, 100.0)
    step = _nice_step(hi - lo)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step, step


def _ticks(
    lo: float, hi: float, step: float, to_px: Callable[[float], float]
) -> list[Tick]:
    n = round((hi - lo) / step)
    return [Tick(to_px(lo + i * step), f"{lo + i * step:g}") for i in range(n + 1)]


def scatter(table: Table) -> Scatter:
    """Lay out one table's entries; CIs become whiskers, the Pareto front a line."""
    ref = table.reference
    xs = [v for e in table.entries for v in e.m.privacy_cmap_ci + (e.m.privacy_cmap,)]
    ys = [v for e in table.entries for v in e.m.action_top1_ci + (e.m.action_top1,)]
    if ref is not None:
        xs.append(ref.privacy_cmap)
        ys.append(ref.action_top1)
    x_lo, x_hi, x_step = _axis(xs)
    y_lo, y_hi, y_step = _axis(ys)
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM

    def px(v: float) -> float:
        return round(LEFT + (v - x_lo) / (x_hi - x_lo) * (right - LEFT), 1)

    def py(v: float) -> float:
        return round(bottom - (v - y_lo) / (y_hi - y_lo) * (bottom - TOP), 1)

    points = []
    for e in table.entries:
        m = e.m
        label = e.name if len(e.name) <= LABEL_CHARS else e.name[: LABEL_CHARS - 1] + "…"
        x = px(m.privacy_cmap)
        points.append(Point(
            x=x, y=py(m.action_top1),
            x_lo=px(m.privacy_cmap_ci[0]), x_hi=px(m.privacy_cmap_ci[1]),
            y_lo=py(m.action_top1_ci[0]), y_hi=py(m.action_top1_ci[1]),
            name=e.name, label=label,
            tooltip=f"{e.name}: action top-1 {m.action_top1:.1f}, "
            f"privacy cMAP {m.privacy_cmap:.1f}",
            pareto=e.pareto, reference=e.is_reference,
            label_left=x > LEFT + (right - LEFT) * 0.6,
        ))
    front = sorted((p for p in points if p.pareto), key=lambda p: p.x)
    return Scatter(
        width=WIDTH, height=HEIGHT, left=LEFT, right=right, top=TOP, bottom=bottom,
        x_ticks=_ticks(x_lo, x_hi, x_step, px), y_ticks=_ticks(y_lo, y_hi, y_step, py),
        points=points, front=" ".join(f"{p.x},{p.y}" for p in front),
        ref_x=px(ref.privacy_cmap) if ref else None,
        ref_y=py(ref.action_top1) if ref else None,
    )
