"""A paper reproduction protocol on one GPU: raw data (`baseline:identity`) and
`baseline:downsample-4x` scored as the protocol fixes, printed next to the numbers the paper
reports for "Raw data" and "Downsample-4x" (the vendored reported results), with the
difference. Needs the protocol's datasets built (`pabench datasets build NAME SOURCE`) and any
weights it names under $TORCH_HOME/hub/checkpoints or `--weights-dir`.

    python benchmarks/gpu_reproduce.py paper-spact-t1-ucf101-vispr1 --device cuda
    python benchmarks/gpu_reproduce.py --list

Records are written to `--out` (default: $PABENCH_HOME/reproductions), so a rerun reuses the
cached models. F1 is shown in percent, the paper's fraction times 100.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pabench.errors import PabenchError
from pabench.evaluation import EvaluationConfig, compute, store
from pabench.io import pabench_home
from pabench.leaderboard.reported import read_reported_csv
from pabench.protocols import PROTOCOLS, ProtocolSpec
from pabench.protocols.spec import Reproduces

ROOT = Path(__file__).resolve().parents[1]
METHODS = {"baseline:identity": "Raw data", "baseline:downsample-4x": "Downsample-4x"}
COLUMNS = (("action", "action"), ("privacy_cmap", "privacy_cmap"), ("privacy_f1", "privacy_f1"))


def reported(rows: list[dict[str, object]], r: Reproduces, method: str) -> dict[str, float]:
    """The paper's numbers for `method` in the setting `r`: the action number from a row whose
    action datasets match, the privacy numbers from one whose privacy datasets match (one row
    carries both where the paper reports them together)."""
    found: dict[str, float] = {}
    for row in rows:
        if (row["source"], row["table"], row["method"]) != (r.paper, r.table, method):
            continue
        a, p = row["action_dataset"], row["privacy_dataset"]
        if a and a != r.action or p and p != r.privacy or not (a or p):
            continue
        for key in ("action", "privacy_cmap", "privacy_f1"):
            if row[key] is not None and (key == "action" and a or key != "action" and p):
                found[key] = float(row[key]) * (100 if key == "privacy_f1" else 1)  # type: ignore[arg-type]
    return found


def ours(record_metrics: object) -> dict[str, float]:
    return {key: float(getattr(record_metrics, key)) for key, _ in COLUMNS}


def shown(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("protocol", nargs="?", help="a reproduction protocol id (--list)")
    parser.add_argument("--list", action="store_true", help="list the reproduction protocols")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:1, cpu")
    parser.add_argument("--data-dir", type=Path, help="built datasets (default: "
                        "$PABENCH_HOME/datasets)")
    parser.add_argument("--weights-dir", type=Path, help="pretrained weights the protocol "
                        "names (default: $TORCH_HOME/hub/checkpoints)")
    parser.add_argument("--reported", type=Path,
                        default=ROOT / "leaderboard" / "reported" / "paper_results.csv",
                        help="the vendored reported results (paper_results.csv)")
    parser.add_argument("--out", type=Path, help="where the records go (default: "
                        "$PABENCH_HOME/reproductions)")
    args = parser.parse_args(argv)
    specs = [p for _, p in PROTOCOLS.items() if p.reproduces is not None]
    if args.list or not args.protocol:
        for p in specs:
            print(f"{p.id}: {p.reproduces.paper}, {p.reproduces.table}: {p.reproduces.setting}")
        return 0
    try:
        spec: ProtocolSpec = PROTOCOLS.get(args.protocol)
        if spec.reproduces is None:
            raise PabenchError(f"protocol '{spec.id}' is not a paper reproduction (--list)")
        rows = read_reported_csv(args.reported)
        out = args.out or pabench_home() / "reproductions"
        lines = []
        for submission, method in METHODS.items():
            config = EvaluationConfig(submission, spec.id, benchmark="real", device=args.device,
                                      data_dir=args.data_dir, weights_dir=args.weights_dir)
            start = time.perf_counter()
            evaluation = compute(config)
            path, _ = store(evaluation, out, replace=True)
            minutes = (time.perf_counter() - start) / 60
            print(f"{submission}: {minutes:.1f} min, record {path}", file=sys.stderr)
            paper, mine = reported(rows, spec.reproduces, method), ours(evaluation.record.metrics)
            for key, label in COLUMNS:
                theirs = paper.get(key)
                diff = None if theirs is None else mine[key] - theirs
                lines.append(f"{method:<14} {label:<13} {shown(mine[key]):>8} {shown(theirs):>8}"
                             f" {shown(diff):>8}")
    except PabenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    r = spec.reproduces
    print(f"{spec.id}@{spec.version}: {r.paper}, {r.table}: {r.setting}")
    print(f"{'method':<14} {'metric':<13} {'pabench':>8} {'paper':>8} {'diff':>8}")
    print("\n".join(lines))
    print(f"{len(spec.approximations)} approximations: pabench protocols show {spec.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
