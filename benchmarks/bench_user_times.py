"""The three times a pa-synth user waits, measured as the user runs them, in one home:

    python benchmarks/bench_user_times.py [--version 6|7] [--only first,known,all]

1. **first**: the README's first command (`pabench evaluate baseline:downsample-4x --protocol
   known --preset tiny`) from an empty `PABENCH_HOME`: builds pa-synth, trains the raw
   reference and the submission.
2. **known**: a `known` record with the raw reference cached (`baseline:downsample-2x`, the
   same home).
3. **all**: `--protocol all` with every protocol's raw reference cached (`baseline:downsample-8x`,
   after an untimed `baseline:identity --protocol all` in the same home).

Each is wall seconds of a `pabench` process on this machine, printed with the cores it had and
their load before it began (a busy core makes every time meaningless: run on idle cores).
`--version` picks the protocols' version (`known@7`, ...); the default is what users get.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = {
    "first": ("README's first command, empty home", "baseline:downsample-4x", "known"),
    "known": ("a known record, raw reference cached", "baseline:downsample-2x", "known"),
    "all": ("--protocol all, references cached", "baseline:downsample-8x", "all"),
}


def pabench(home: Path, anonymizer: str, protocol: str, version: int | None) -> float:
    """Wall seconds of one `pabench evaluate` in `home`; its output goes to home/logs."""
    if version is not None:
        protocol = f"{protocol}@{version}"
    cmd = [sys.executable, "-m", "pabench.cli", "evaluate", anonymizer, "--protocol", protocol,
           "--preset", "tiny", "--output-dir", str(home / "records")]
    log = home / "logs" / f"{anonymizer.split(':')[1]}-{protocol}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(cmd, env={**os.environ, "PABENCH_HOME": str(home)},
                              stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}); its output: {log}")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", type=int, help="protocol version (default: the default's)")
    ap.add_argument("--only", default="first,known,all", help="which of first,known,all")
    ap.add_argument("--home", type=Path, help="an empty folder to use (default: a new one)")
    a = ap.parse_args()
    home = a.home or Path(tempfile.mkdtemp(prefix="pabench-user-times-"))
    if any(home.iterdir()):
        sys.exit(f"{home}: not empty; the first time is measured from an empty home")
    print(f"{os.cpu_count()} cores, load before start {os.getloadavg()[0]:.2f}, home {home}")
    chosen = a.only.split(",")
    if "first" not in chosen:  # later steps need the raw reference cached
        pabench(home, "baseline:identity", "known", a.version)
    for name in chosen:
        what, anonymizer, protocol = STEPS[name]
        if name == "all":
            pabench(home, "baseline:identity", "all", a.version)
        seconds = pabench(home, anonymizer, protocol, a.version)
        print(f"{name:6} {what:40} {seconds / 60:6.1f} min ({seconds:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
