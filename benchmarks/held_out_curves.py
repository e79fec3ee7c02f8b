"""Compare learned-baseline recipes on held-out clips only: the curves CSVs that
`pabench train-baseline` writes beside each export (rows every `--eval-every` steps, measured on
the training namespace's own held-out split, never on a protocol's test split).

    python benchmarks/held_out_curves.py --column val_match A.curves.csv B.curves.csv ...

Prints per file the mean of `--column` over the rows of the second half of training, the
lowest held-out top-1 there (the utility bar a recipe must keep) and, where the run had
`--held-out-attack`, the fresh attackers' held-out cMAP from the `.held-out-attack.json` beside
it (the worse first, then each attacker's): the privacy a recipe is judged on, so one command
prints a check's whole table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def _attack(curves: Path) -> str:
    """`cmap (model cmap, ...)` from the export's held-out attack, or '-' where none was run."""
    path = curves.with_name(curves.name.removesuffix(".curves.csv") + ".held-out-attack.json")
    if not path.is_file():
        return "-"
    attack = json.loads(path.read_text())
    each = ", ".join(f"{m} {v:.1f}" for m, v in attack["per_model"].items())
    return f"{attack['cmap']:.1f} ({each})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("curves", nargs="+", type=Path)
    ap.add_argument("--column", default="val_cmap", help="val_cmap (VITA family), val_match "
                    "(SPAct), or another held-out column")
    a = ap.parse_args()
    print(f"{'curves':60s} {'rows':>4s} {a.column + ' mean':>14s} {'min val_top1':>12s}  "
          "held-out attack cMAP")
    for path in a.curves:
        try:
            rows = pd.read_csv(path)
        except pd.errors.EmptyDataError:
            print(f"{path}: no rows yet (is its run still at the identity stage?)")
            continue
        half = rows[rows["step"] > rows["step"].max() / 2]
        print(f"{str(path):60s} {len(half):4d} {half[a.column].mean():14.1f} "
              f"{half['val_top1'].min():12.1f}  {_attack(path)}")


if __name__ == "__main__":
    main()
