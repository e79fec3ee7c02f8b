"""Per-epoch validation curves as SVG geometry, computed here so entry pages need no script.

A record's curves are the evidence that its target and attackers converged: a best epoch at the
end of the budget, or a curve still rising, says a run stopped early. One small plot per model,
one line per seed and attempt; attempts replaced by a retry at another learning rate are dashed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pabench.leaderboard.scatter import Tick, axis_range, axis_ticks, nice_step
from pabench.records import Curve, Record

WIDTH, HEIGHT = 320, 200
LEFT, RIGHT, TOP, BOTTOM = 40, 10, 12, 34
SEED_COLOURS = 6  # .seed-0 … .seed-5 in style.css, reused beyond that


@dataclass(frozen=True)
class Line:
    points: str  # SVG polyline points
    best_x: float | None  # the kept epoch's marker; None when the best epoch is not recorded
    best_y: float | None
    dashed: bool
    colour: int
    tooltip: str


@dataclass(frozen=True)
class CurvePlot:
    title: str
    metric: str
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    lines: list[Line]
    seeds: list[tuple[int, int]]  # (seed, colour) for the legend


def curve_plot(title: str, curves: list[Curve], metric: str) -> CurvePlot | None:
    """Validation score by epoch for one model's runs; None when none was recorded."""
    curves = [c for c in curves if c.val_score]
    if not curves:
        return None
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM
    last = max(2, max(len(c.val_score) for c in curves))
    y_lo, y_hi, y_step = axis_range([v for c in curves for v in c.val_score])

    def px(epoch: float) -> float:
        return round(LEFT + (epoch - 1) / (last - 1) * (right - LEFT), 1)

    def py(v: float) -> float:
        return round(bottom - (v - y_lo) / (y_hi - y_lo) * (bottom - TOP), 1)

    x_step = max(1, round(nice_step(last - 1)))
    x_ticks = [Tick(px(e), str(e)) for e in sorted({1, *range(x_step, last + 1, x_step)})]
    colour = {seed: i % SEED_COLOURS for i, seed in enumerate(sorted({c.seed for c in curves}))}
    lines = []
    for c in curves:
        best = c.best_epoch if 1 <= c.best_epoch <= len(c.val_score) else None
        at_best = f" (val {metric} {c.val_score[best - 1]:.1f})" if best else ""
        lines.append(Line(
            points=" ".join(f"{px(i + 1)},{py(v)}" for i, v in enumerate(c.val_score)),
            best_x=px(best) if best else None, best_y=py(c.val_score[best - 1]) if best else None,
            dashed=not c.chosen, colour=colour[c.seed],
            tooltip=f"seed {c.seed}, lr {c.lr:g}: best epoch {c.best_epoch} of {c.epochs}"
            f"{at_best}{'' if c.chosen else '; replaced by a retry at another lr'}",
        ))
    return CurvePlot(
        title=title, metric=metric, width=WIDTH, height=HEIGHT, left=LEFT, right=right,
        top=TOP, bottom=bottom, x_ticks=x_ticks, y_ticks=axis_ticks(y_lo, y_hi, y_step, py),
        lines=lines, seeds=sorted(colour.items()),
    )


def curve_plots(record: Record) -> list[CurvePlot]:
    """The target's plot, then one per attacker, for those with recorded curves."""
    m = record.metrics
    action = "cMAP" if m.action_metric == "cmap" else "top-1"
    plots = [curve_plot("action target", m.target_curves, action)]
    plots += [curve_plot(f"attacker {a.arch}", a.curves, "cMAP") for a in record.attackers]
    return [p for p in plots if p is not None]
