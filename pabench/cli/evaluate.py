"""`pabench evaluate`: score anonymizers under protocols and print or store their records."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from pabench.cli.console import cell, clean, err, out, print_table
from pabench.cli.progress import progress_bar
from pabench.cli.usage import checking_arguments
from pabench.errors import PabenchError
from pabench.io import pabench_home
from pabench.records import Record

if TYPE_CHECKING:
    from pabench.evaluation import EvaluationConfig


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value * 100:+.1f}%" if pct else f"{value:.1f}"


def print_record(record: Record) -> None:
    m, raw = record.metrics, record.raw
    table = Table(title=cell(f"{record.submission.name} on {record.benchmark.name}/"
                             f"{record.benchmark.preset}, protocol {record.protocol.id} "
                             f"v{record.protocol.version}"))
    action = "action cMAP" if m.action_metric == "cmap" else "action top-1"
    for col in ("", action, "privacy cMAP (worst)", "privacy (0 chance, 1 raw)",
                "privacy F1 (worst)", "cMAP (mean)"):
        table.add_column(col)
    norm = (f"{m.privacy_norm:.2f} [{m.privacy_norm_ci[0]:.2f}, {m.privacy_norm_ci[1]:.2f}]"
            if m.privacy_norm is not None and m.privacy_norm_ci is not None else "-")
    table.add_row(
        "anonymized", f"{m.action:.1f} [{m.action_ci[0]:.1f}, {m.action_ci[1]:.1f}]",
        f"{m.privacy_cmap:.1f} [{m.privacy_cmap_ci[0]:.1f}, {m.privacy_cmap_ci[1]:.1f}]",
        norm, f"{m.privacy_f1:.1f}", f"{m.privacy_cmap_mean:.1f}",
    )
    if raw is not None:
        table.add_row("raw", _fmt(raw.action), _fmt(raw.privacy_cmap), "1.00",
                      _fmt(raw.privacy_f1), _fmt(raw.privacy_cmap_mean))
    chance = _fmt(m.action_chance) if m.action_chance is not None else "-"
    table.add_row("chance", chance, _fmt(m.base_cmap) if m.base_cmap is not None else "-",
                  "0.00", "", "")
    if raw is not None:
        table.add_row("relative drop", _fmt(m.action_drop, True), _fmt(m.privacy_drop, True),
                      "", "", "")
    if (g := record.vs_raw) is not None:  # scoring 2: paired on the same videos and seeds
        table.add_row("less raw (paired)",
                      f"{g.action:+.1f} [{g.action_ci[0]:+.1f}, {g.action_ci[1]:+.1f}]",
                      f"{g.privacy_cmap:+.1f} [{g.privacy_cmap_ci[0]:+.1f}, "
                      f"{g.privacy_cmap_ci[1]:+.1f}]", "", "", "")
    print_table(table)
    attrs = sorted(record.attackers[0].per_attribute)
    att = Table("attacker", "cMAP", "raw cMAP", "F1", "best epochs", *[clean(a) for a in attrs])
    for a in record.attackers:
        best = ",".join(str(c.best_epoch) for c in a.curves if c.chosen) or str(a.epochs)
        weak = " (weak)" if a.strong is False else ""
        att.add_row(cell(a.arch) + weak, f"{a.cmap:.1f}",
                    _fmt(a.raw_cmap) if a.raw_cmap is not None else "-", f"{a.f1:.1f}", best,
                    *[f"{a.per_attribute[k]['ap']:.1f}" for k in attrs])
    print_table(att)
    if record.submission.replicas:
        out.print(f"training seeds: {_training_seeds(record)} (seed k's models scored replica k)")
    if record.consistency is not None:
        c = record.consistency
        out.print(f"consistency check ({c.model} telling test from training clips): AUC "
                  f"{c.auc:.1f} [{c.auc_ci[0]:.1f}, {c.auc_ci[1]:.1f}], "
                  f"{'passed' if c.passed else 'FAILED'} (threshold {c.threshold:g})")
    for flag in record.flags:
        out.print(f"note: {cell(flag)}")
    if not record.ranked:
        out.print("this record is not ranked (see the notes above)")


def _training_seeds(record: Record) -> str:
    s = record.submission
    shown = [(record.seeds[0], s.sha256, s.training_seed),
             *((r.seed, r.sha256, r.training_seed) for r in s.replicas)]
    return ", ".join(f"seed {seed}: {sha[:12]}" + (f" (trained with seed {t})" if t is not None
                                                   else "") for seed, sha, t in shown)


LOCAL_FOLDERS = ("--output-dir", "--data-dir")
FILE_OPTIONS = ("--meta", "--replica")
WHERE_IT_RUNS = ("--executor", "--slurm")


def rerun_command(argv: list[str], submissions: list[str]) -> str:
    """The command a record keeps to re-run it, naming no local path: submission, sidecar and
    replica files by their file name (`pabench evaluate my.pt2 --protocol known`), and
    without --output-dir / --data-dir, which are where this machine keeps things, nor where
    it ran (--executor, --slurm, --no-wait), which does not change the record."""
    files = {s for s in submissions if not s.startswith("baseline:")}
    kept: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        option, eq, value = token.partition("=")
        if token == "--no-wait":
            continue
        if option in LOCAL_FOLDERS + WHERE_IT_RUNS:
            if not eq:
                next(tokens, None)
        elif option in FILE_OPTIONS:
            kept.append(f"{option}={Path(value).name}" if eq else token)
            if not eq:
                kept.append(Path(next(tokens, "")).name)
        else:
            kept.append(Path(token).name if token in files else token)
    return shlex.join(["pabench", *kept])


ADVANCED = "Advanced options"
STORAGE = "Where files go"


def evaluate(
    submissions: list[str] = typer.Argument(
        ..., show_default=False, help="Files (.pt2 / TorchScript) or baseline:NAME, "
        "baseline:a,b, baseline:all; several share the data and the raw reference"),
    protocol: str = typer.Option("known", help="Protocol id, ID@VERSION, 'all' (every "
                                 "protocol of the benchmark but the paper reproductions) or "
                                 "'all@VERSION'"),
    benchmark: str = typer.Option("pa-synth", help="pa-synth or real"),
    preset: str = typer.Option("auto", help="pa-synth preset: tiny, standard, or auto "
                               "(standard on a GPU, tiny on CPU)"),
    device: str = typer.Option("cpu", help="cpu, cuda, cuda:1, ..."),
    meta: Path | None = typer.Option(None, help="Sidecar JSON (default: NAME.json)"),
    json_out: bool = typer.Option(False, "--json", help="Print the record as JSON (a list "
                                  "when several are scored)"),
    output_dir: Path | None = typer.Option(
        None, rich_help_panel=STORAGE, help="Where records go (default: "
        "$PABENCH_HOME/results); `pabench leaderboard add` makes one official"),
    data_dir: Path | None = typer.Option(
        None, rich_help_panel=STORAGE, help="Built datasets (default: $PABENCH_HOME/"
        "datasets); pa-synth builds itself there on first use"),
    replace: bool = typer.Option(False, "--replace", rich_help_panel=STORAGE,
                                 help="Replace a record of another submission of the same name"),
    save_predictions: bool = typer.Option(
        False, "--save-predictions", rich_help_panel=STORAGE, help="Also write per-video test "
        "scores (NAME.predictions.parquet, for `pabench datasets view --predictions`)"),
    seed: int | None = typer.Option(None, rich_help_panel=ADVANCED,
                                    help="Replace the protocol's seeds by this one"),
    workers: int = typer.Option(0, rich_help_panel=ADVANCED, help="Models trained side by "
                                "side (0: one per core on CPU, up to 12 per GPU for pa-synth; "
                                "else 1)"),
    weights_dir: Path | None = typer.Option(
        None, rich_help_panel=STORAGE, help="Pretrained weights a protocol names (default: "
        "$TORCH_HOME/hub/checkpoints, torchvision's own); never downloaded"),
    replica: list[Path] = typer.Option(
        [], rich_help_panel=ADVANCED, help="The method trained with another seed, one file "
        "per evaluation seed after the first (repeat): seed k's models score replica k"),
    executor: str = typer.Option("here", rich_help_panel=ADVANCED, help="here, slurm (a "
                                 "submitit job per submission and protocol) or local (those "
                                 "jobs as local processes)"),
    slurm: list[str] = typer.Option([], rich_help_panel=ADVANCED, metavar="KEY=VALUE",
                                    help="submitit parameter of the jobs (repeat): "
                                    "slurm_partition=P, timeout_min=M, folder=DIR, ..."),
    no_wait: bool = typer.Option(False, "--no-wait", rich_help_panel=ADVANCED,
                                 help="Print the jobs' ids and return"),
) -> None:
    """Score an anonymizer: fresh targets and attackers trained on its output.

    Check a file first with `pabench validate FILE` (seconds, no training).

    Examples:

      pabench evaluate my-anonymizer.pt2 --protocol known

      pabench evaluate baseline:downsample-4x,black --preset tiny --json
    """
    from pabench.evaluation import compute, expand, store
    from pabench.evaluation.store import predictions_path
    from pabench.io import check_writable
    from pabench.records.outcomes import outcomes_path
    from pabench.runtime import is_rank0
    from pabench.submission.core import fail

    with checking_arguments():
        cluster_options = _cluster_options(executor, slurm, no_wait)
        for submission in submissions:
            if not submission.startswith("baseline:") and not Path(submission).exists():
                raise fail(Path(submission), "file not found")
        if meta is not None and len(submissions) > 1:
            raise PabenchError("--meta names the sidecar of one submission; give each file "
                               "its NAME.json instead")
        if replica and len(submissions) > 1:
            raise PabenchError("--replica names other seeds of one submission; evaluate "
                               "submissions with replicas one at a time")
        for path in replica:
            if not path.exists():
                raise fail(path, "file not found")
        configs = [c for submission in submissions
                   for c in expand(submission, protocol, benchmark=benchmark, preset=preset,
                                   data_dir=data_dir, device=device, seed=seed,
                                   meta_path=meta, workers=workers, replicas=tuple(replica),
                                   weights_dir=weights_dir,
                                   command=rerun_command(sys.argv[1:], submissions))]
    if preset == "auto" and benchmark == "pa-synth":
        err.print(f"preset: {configs[0].preset} (auto for device {clean(device)}; --preset "
                  "standard for the full-size benchmark)")
    results = output_dir or pabench_home() / "results"
    check_writable(results)  # fail before hours of training, not after
    if cluster_options is not None:
        _on_cluster(configs, results, executor, cluster_options, wait=not no_wait,
                    replace=replace, save_predictions=save_predictions, json_out=json_out)
        return
    records: list[Record] = []
    for config in configs:
        with progress_bar() as bar:
            evaluation = compute(config, bar)
        if is_rank0():
            path, replaced = store(evaluation, results, replace=replace,
                                   save_predictions=save_predictions)
            err.print(Text.assemble("replaced " if replaced else "wrote ", cell(path)))
            if evaluation.record.outcomes is not None:
                err.print(Text.assemble("wrote ", cell(outcomes_path(path))))
            if save_predictions:
                err.print(Text.assemble("wrote ", cell(predictions_path(path))))
            if json_out:
                records.append(evaluation.record)
            else:
                print_record(evaluation.record)
    _print_json(records, several=len(configs) > 1)


def _print_json(records: list[Record], several: bool) -> None:
    """One JSON document on stdout, whatever the number of records."""
    from pydantic import TypeAdapter

    if records:
        print(TypeAdapter(list[Record]).dump_json(records, indent=2).decode() if several
              else records[0].model_dump_json(indent=2))


def _cluster_options(executor: str, pairs: list[str], no_wait: bool) -> dict | None:
    """The submitit parameters of `--executor slurm|local`, checked before any work; None to
    evaluate in this process."""
    from pabench.errors import unknown_name

    if executor == "here":
        if pairs or no_wait:
            raise PabenchError("--slurm and --no-wait are for --executor slurm (or local)")
        return None
    from pabench.evaluation.cluster import EXECUTORS, parse_options

    if executor not in EXECUTORS:
        raise unknown_name("executor", executor, ("here", *EXECUTORS))
    return parse_options(pairs)


def _on_cluster(configs: list[EvaluationConfig], results: Path, executor: str, options: dict,
                *, wait: bool, replace: bool, save_predictions: bool, json_out: bool) -> None:
    """Submit one job per evaluation; unless told not to, wait for all and report each, a
    failed one in one line, then fail if any did (the others' records are written)."""
    from pabench.evaluation import cluster
    from pabench.records import read_record

    jobs = cluster.submit(configs, results, executor=executor, options=options,
                          replace=replace, save_predictions=save_predictions)
    for job, what in jobs:
        err.print(Text.assemble(f"submitted job {job.job_id}: ", cell(what.label)))
    if not wait:
        print(" ".join(str(job.job_id) for job, _ in jobs))
        return
    records: list[Record] = []
    failed = 0
    for o in cluster.outcomes(jobs):
        if o.record is None:
            failed += 1
            err.print(Text.assemble(f"job {o.job_id} failed: ",
                                    cell(f"{o.label}: {o.error} (log: {o.log})")))
            continue
        err.print(Text.assemble(f"job {o.job_id} wrote ", cell(o.record)))
        record = read_record(o.record)
        if json_out:
            records.append(record)
        else:
            print_record(record)
    _print_json(records, several=len(configs) > 1)
    if failed:
        raise PabenchError(f"{failed} of {len(jobs)} jobs failed (their logs are named above); "
                           "rerun the command: finished evaluations come back from the caches")
