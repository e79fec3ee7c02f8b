"""The `pabench` command: thin Typer wrappers over library calls, one sub-app per concept."""

from __future__ import annotations

import sys

import typer
from rich.text import Text

from pabench import __version__
from pabench.cli import doctor
from pabench.cli.baselines import app as baselines_app
from pabench.cli.console import cell, err, out, show_library_log
from pabench.cli.datasets import app as datasets_app
from pabench.cli.evaluate import evaluate
from pabench.cli.leaderboard import app as leaderboard_app
from pabench.cli.protocols import app as protocols_app
from pabench.cli.train_baseline import train_baseline
from pabench.cli.usage import exit_status
from pabench.errors import PabenchError, one_line

app = typer.Typer(help=__doc__, no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(baselines_app, name="baselines")
app.add_typer(datasets_app, name="datasets")
app.add_typer(leaderboard_app, name="leaderboard")
app.add_typer(protocols_app, name="protocols")
app.command()(evaluate)
app.command()(doctor.doctor)
app.command("train-baseline")(train_baseline)


def _print_version(value: bool) -> None:
    if value:
        out.print(f"pabench {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print `pabench VERSION` and exit"),
) -> None:
    """Options of `pabench` itself (the app's help stays the module docstring)."""


def main() -> None:
    """Console entry point: a PabenchError becomes one line on stderr and exit status 2 (a bad
    command line) or 1 (a failure during the work); see `pabench.cli.usage`."""
    show_library_log()
    try:
        app()
    except PabenchError as e:
        err.print(Text.assemble(("error: ", "bold red"), cell(one_line(e))))
        sys.exit(exit_status(e))
