"""Compare learned-baseline recipes on held-out clips only: the curves CSVs that
`pabench train-baseline` writes beside each export (rows every `--eval-every` steps, measured on
the training namespace's own held-out split, never on a protocol's test split).

    python benchmarks/held_out_curves.py --column val_match A.curves.csv B.curves.csv ...

Prints per file the mean of `--column` over the rows of the second half of training and the
lowest held-out top-1 there (the utility bar a recipe must keep).
"""

from __future__ import annotations

import argparse

import pandas as pd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("curves", nargs="+")
    ap.add_argument("--column", default="val_cmap", help="val_cmap (VITA family), val_match "
                    "(SPAct), or another held-out column")
    a = ap.parse_args()
    print(f"{'curves':60s} {'rows':>4s} {a.column + ' mean':>14s} {'min val_top1':>12s}")
    for path in a.curves:
        try:
            rows = pd.read_csv(path)
        except pd.errors.EmptyDataError:
            print(f"{path}: no rows yet (is its run still at the identity stage?)")
            continue
        half = rows[rows["step"] > rows["step"].max() / 2]
        print(f"{path:60s} {len(half):4d} {half[a.column].mean():14.1f} "
              f"{half['val_top1'].min():12.1f}")


if __name__ == "__main__":
    main()
