"""The `pabench` command: thin Typer wrappers over library calls, one sub-app per concept."""

from __future__ import annotations

import sys

import typer
from rich.text import Text

from pabench.cli.baselines import app as baselines_app
from pabench.cli.console import cell, err, show_library_log
from pabench.cli.datasets import app as datasets_app
from pabench.cli.evaluate import evaluate, protocols_app
from pabench.cli.leaderboard import app as leaderboard_app
from pabench.errors import PabenchError

app = typer.Typer(help=__doc__, no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(baselines_app, name="baselines")
app.add_typer(datasets_app, name="datasets")
app.add_typer(leaderboard_app, name="leaderboard")
app.add_typer(protocols_app, name="protocols")
app.command()(evaluate)


def main() -> None:
    """Console entry point: a PabenchError becomes one line on stderr and exit status 2."""
    show_library_log()
    try:
        app()
    except PabenchError as e:
        err.print(Text.assemble(("error: ", "bold red"), cell(e)))
        sys.exit(2)
