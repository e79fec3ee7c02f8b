"""Geometry of the privacy-vs-action trade-off plot, computed here so the SVG needs no script.

As in the papers' figures: x = worst-case privacy cMAP (left is more private), y = action score
(up is more useful), dashed lines at the raw-data reference, and a dotted line at the
attributes' base rate: the privacy an attacker that learned nothing gets, so no anonymizer can
usefully score left of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from pabench.leaderboard.tables import Table

WIDTH, HEIGHT = 600, 400
LEFT, RIGHT, TOP, BOTTOM = 56, 18, 26, 48
LABEL_CHARS = 22
MAX_LABELS = 40  # label tries stop here: a crowded plot keeps tooltips, and stays fast
CHAR_PX, LABEL_PX, MARK_PX = 6.2, 11.0, 6.0  # 11px label font; marker half-size
# Label spots tried in order around a marker: (dx, dy of the text baseline, text-anchor)
SPOTS = ((8, -7, "start"), (-8, -7, "end"), (8, 15, "start"), (-8, 15, "end"),
         (0, -10, "middle"), (0, 19, "middle"))

Box = tuple[float, float, float, float]  # x0, y0, x1, y1


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
    control: bool = False
    label_x: float = 0.0
    label_y: float = 0.0
    anchor: str = "start"


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
    action_metric: str = "top-1"
    base_x: float | None = None  # privacy at chance
    off_plot: tuple[str, ...] = ()  # chance controls left out of the axes, with their numbers


def nice_step(span: float, target: int = 5) -> float:
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def axis_range(values: list[float]) -> tuple[float, float, float]:
    """Round (lo, hi) out to tick multiples, clamped to the 0-100 percentage range."""
    lo, hi = min(values), max(values)
    pad = max((hi - lo) * 0.08, 1.0)
    lo, hi = max(lo - pad, 0.0), min(hi + pad, 100.0)
    step = nice_step(hi - lo)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step, step


def axis_ticks(
    lo: float, hi: float, step: float, to_px: Callable[[float], float]
) -> list[Tick]:
    n = round((hi - lo) / step)
    return [Tick(to_px(lo + i * step), f"{lo + i * step:g}") for i in range(n + 1)]


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _place_labels(points: list[Point], bounds: Box, obstacles: list[Box]) -> list[Point]:
    """Greedy placement: Pareto and reference labels first, each at the first spot that
    overlaps no marker and no placed label; a label with no free spot is dropped (the marker
    keeps its tooltip and the table has the row), so text never overprints text. Only the
    first MAX_LABELS points in that order are tried: each try scans every marker."""
    taken = obstacles + [(p.x - MARK_PX, p.y - MARK_PX, p.x + MARK_PX, p.y + MARK_PX)
                         for p in points]
    placed: dict[int, Point] = {}
    order = sorted(range(len(points)), key=lambda i: (not points[i].pareto,
                                                       not points[i].reference, points[i].y))
    for n, i in enumerate(order):
        p = points[i]
        if n >= MAX_LABELS:
            placed[i] = replace(p, label="")
            continue
        width = len(p.label) * CHAR_PX
        for dx, dy, anchor in SPOTS:
            x, y = p.x + dx, p.y + dy
            x0 = {"start": x, "end": x - width, "middle": x - width / 2}[anchor]
            box = (x0, y - LABEL_PX + 2, x0 + width, y + 3)
            inside = (bounds[0] <= box[0] and box[2] <= bounds[2] and bounds[1] <= box[1]
                      and box[3] <= bounds[3])
            if inside and not any(_overlaps(box, t) for t in taken):
                taken.append(box)
                placed[i] = replace(p, label_x=round(x, 1), label_y=round(y, 1), anchor=anchor)
                break
        else:
            placed[i] = replace(p, label="")
    return [placed[i] for i in range(len(points))]


def scatter(table: Table) -> Scatter:
    """Lay out the table's shown entries; CIs become whiskers, the Pareto front a line. A chance
    control (all-black, action at chance) is named in the caption instead of drawn: its point
    alone would stretch the action axis to 0 and press every anonymizer into its top line."""
    ref, metric, base = table.reference, table.action_metric, table.base_cmap
    chance = [e for e in table.shown if e.is_chance_control]
    drawn = [e for e in table.shown if not e.is_chance_control]
    if not drawn:  # a table of chance controls only is drawn as it is
        drawn, chance = chance, []
    off = tuple(f"{e.name} (action {metric} {e.m.action:.1f}, privacy cMAP "
                f"{e.m.privacy_cmap:.1f})" for e in chance)
    xs = [v for e in drawn for v in e.m.privacy_cmap_ci + (e.m.privacy_cmap,)]
    ys = [v for e in drawn for v in e.m.action_ci + (e.m.action,)]
    if ref is not None:
        xs.append(ref.privacy_cmap)
        ys.append(ref.action)
    if base is not None:
        xs.append(base)
    x_lo, x_hi, x_step = axis_range(xs)
    y_lo, y_hi, y_step = axis_range(ys)
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM

    def px(v: float) -> float:
        return round(LEFT + (v - x_lo) / (x_hi - x_lo) * (right - LEFT), 1)

    def py(v: float) -> float:
        return round(bottom - (v - y_lo) / (y_hi - y_lo) * (bottom - TOP), 1)

    points = []
    for e in drawn:
        m = e.m
        label = e.name if len(e.name) <= LABEL_CHARS else e.name[: LABEL_CHARS - 1] + "…"
        x = px(m.privacy_cmap)
        points.append(Point(
            x=x, y=py(m.action),
            x_lo=px(m.privacy_cmap_ci[0]), x_hi=px(m.privacy_cmap_ci[1]),
            y_lo=py(m.action_ci[0]), y_hi=py(m.action_ci[1]),
            name=e.name, label=label,
            tooltip=f"{e.name}{' (lossless control)' if e.is_control else ''}: action "
            f"{metric} {m.action:.1f}, privacy cMAP {m.privacy_cmap:.1f}",
            pareto=e.pareto, reference=e.is_reference, control=e.is_control,
        ))
    # the "raw" and "chance" tags the template writes beside the reference and base lines
    tags = ([(right - 4 - 3 * CHAR_PX, py(ref.action) - 5 - LABEL_PX, right - 4,
              py(ref.action) - 2)] if ref is not None else [])
    if base is not None:
        tags.append((px(base) + 3, TOP + 2, px(base) + 5 + 6 * CHAR_PX, TOP + 4 + LABEL_PX))
    points = _place_labels(points, (LEFT + 2, 2, right - 2, bottom - 2), tags)
    front = sorted((p for p in points if p.pareto), key=lambda p: p.x)
    return Scatter(
        width=WIDTH, height=HEIGHT, left=LEFT, right=right, top=TOP, bottom=bottom,
        x_ticks=axis_ticks(x_lo, x_hi, x_step, px), y_ticks=axis_ticks(y_lo, y_hi, y_step, py),
        points=points, front=" ".join(f"{p.x},{p.y}" for p in front),
        ref_x=px(ref.privacy_cmap) if ref else None,
        ref_y=py(ref.action) if ref else None, action_metric=metric,
        base_x=px(base) if base is not None else None, off_plot=off,
    )
