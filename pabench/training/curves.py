"""Training curves of a learned baseline: a CSV log and a PNG plot next to its output.

A row is written every few minimax iterations: the mean training losses since the last row and
held-out utility and privacy measured on clips of the method's own namespace that it never
trains on. The plot is drawn with Pillow (already installed with torchvision; matplotlib is not
a dependency): one small panel per column, so a user sees at a glance whether utility held and
privacy fell.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw

from pabench.io import atomic_write, atomic_write_text

Row = dict[str, float]
PANEL_W, PANEL_H, PAD = 300, 170, 34


class Curves:
    """Collects rows, rewrites `csv` and `png` after each one (both are small), and passes a
    one-line summary of the row to `echo` (the CLI prints it on stderr)."""

    def __init__(self, csv_path: Path, png_path: Path,
                 echo: Callable[[str], None] | None = None) -> None:
        self.csv_path, self.png_path, self.echo = csv_path, png_path, echo
        self.rows: list[Row] = []

    def restore(self, rows: list[Row]) -> None:
        """Continue from a checkpoint's rows: a resumed run's log holds every row once."""
        self.rows = [dict(r) for r in rows]

    def add(self, row: Row, total: int) -> None:
        self.rows.append(dict(row))
        self.write()
        if self.echo:
            self.echo(describe(row, total))

    def write(self) -> None:
        columns = list(dict.fromkeys(k for r in self.rows for k in r))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: _fmt(v) for k, v in r.items()} for r in self.rows)
        atomic_write_text(self.csv_path, buf.getvalue())
        image = plot(self.rows)
        atomic_write(self.png_path, lambda tmp: image.save(tmp, format="PNG"))


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:.6g}"


def describe(row: Row, total: int) -> str:
    """`minimax 25/300: fa_utility 0.41, ... | held-out val_top1 97.0, ...`."""
    train = [f"{k} {v:.3f}" for k, v in row.items() if k != "step" and not k.startswith("val_")
             and not math.isnan(v)]
    held = [f"{k[4:]} {v:.3f}" for k, v in row.items() if k.startswith("val_")]
    return (f"minimax {int(row['step'])}/{total}: " + ", ".join(train)
            + (" | held-out " if train else "held-out ") + ", ".join(held))


def plot(rows: list[Row]) -> Image.Image:
    """One panel per column against `step`, three panels a row, min and max labelled."""
    keys = [k for k in dict.fromkeys(k for r in rows for k in r) if k != "step"]
    cols = 3
    n_rows = max(1, math.ceil(len(keys) / cols))
    image = Image.new("RGB", (cols * PANEL_W, n_rows * PANEL_H), "white")
    draw = ImageDraw.Draw(image)
    for i, key in enumerate(keys):
        x0, y0 = (i % cols) * PANEL_W, (i // cols) * PANEL_H
        points = [(r["step"], r[key]) for r in rows if key in r and not math.isnan(r[key])]
        colour = (200, 40, 40) if key.startswith("val_") else (40, 80, 200)
        draw.text((x0 + PAD, y0 + 4), key, fill=colour)
        box = (x0 + PAD, y0 + 20, x0 + PANEL_W - 10, y0 + PANEL_H - 20)
        draw.rectangle(box, outline=(180, 180, 180))
        if not points:
            continue
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        x_lo, lo, hi = min(xs), min(ys), max(ys)
        span_x, span_y = (max(xs) - x_lo) or 1.0, (hi - lo) or 1.0
        scaled = [(box[0] + (x - x_lo) / span_x * (box[2] - box[0]),
                   box[3] - (y - lo) / span_y * (box[3] - box[1])) for x, y in points]
        if len(scaled) > 1:
            draw.line(scaled, fill=colour, width=2)
        for p in scaled:
            draw.ellipse((p[0] - 2, p[1] - 2, p[0] + 2, p[1] + 2), fill=colour)
        draw.text((x0 + 2, box[1]), f"{hi:.3g}", fill="black")
        draw.text((x0 + 2, box[3] - 10), f"{lo:.3g}", fill="black")
        draw.text((box[0], box[3] + 3), f"step {min(xs):g}", fill="black")
        draw.text((box[2] - 60, box[3] + 3), f"{max(xs):g}", fill="black")
    return image
