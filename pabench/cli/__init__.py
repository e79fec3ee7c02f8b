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
from pabench.cli.submission import app as submission_app
from pabench.cli.train_baseline import train_baseline
from pabench.cli.usage import FAILURE_EXIT, USAGE_EXIT, exit_status
from pabench.cli.validate import validate_file
from pabench.errors import PabenchError, one_line

app = typer.Typer(help=__doc__, no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(baselines_app, name="baselines")
app.add_typer(datasets_app, name="datasets")
app.add_typer(leaderboard_app, name="leaderboard")
app.add_typer(protocols_app, name="protocols")
app.add_typer(submission_app, name="submission")
app.command()(evaluate)
app.command()(doctor.doctor)
app.command("train-baseline")(train_baseline)
app.command("validate")(validate_file)


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
    """Console entry point: a PabenchError, or a usage error click finds (a missing argument, an
    unknown option), becomes one line on stderr and exit status 2 (a bad command line) or 1 (a
    failure during the work); see `pabench.cli.usage`."""
    show_library_log()
    try:
        status = app(standalone_mode=False, prog_name="pabench")
    except PabenchError as e:
        _error(one_line(e))
        sys.exit(exit_status(e))
    except typer.TyperException as e:  # click's errors (vendored by typer since 0.26)
        if type(e).__name__ != "NoArgsIsHelpError":  # that one has printed the help already
            ctx = getattr(e, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            _error(e.format_message().rstrip(".") + hint)
        sys.exit(getattr(e, "exit_code", USAGE_EXIT))
    except typer.Abort:
        _error("aborted")
        sys.exit(FAILURE_EXIT)
    sys.exit(status if isinstance(status, int) else 0)


def _error(message: str) -> None:
    err.print(Text.assemble(("error: ", "bold red"), cell(message)))
