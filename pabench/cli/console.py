"""The consoles every command prints through: user text is shown, never interpreted.

Names, paths and error messages come from files and arguments a user (or an attacker) chose, so
Rich markup and emoji codes are off, and control characters are shown escaped rather than sent
to the terminal. Styling is added with `Text` objects by the commands themselves.

`out` (stdout) carries a command's result only; progress bars, logs and notes go to `err`
(stderr), so that `--json` output can be piped straight into a JSON parser.
"""

from __future__ import annotations

import json
import logging

from rich.console import Console, RenderableType
from rich.text import Text

from pabench.io import printable

out = Console(markup=False, emoji=False, highlight=False)
err = Console(stderr=True, markup=False, emoji=False, highlight=False, soft_wrap=True)


def clean(text: object) -> str:
    """`text` as it may reach the terminal (see `pabench.io.printable`)."""
    return printable(text)


def print_table(table: RenderableType) -> None:
    """A table on stdout; where stdout is no terminal (a log file, a batch job's output) at its
    natural width, since Rich would otherwise fit it to 80 columns and cut names and numbers."""
    if out.is_terminal:
        out.print(table)
        return
    natural = out.measure(table, options=out.options.update_width(10_000)).maximum
    wide = Console(file=out.file, width=max(out.width, natural), markup=False, emoji=False,
                   highlight=False)  # `out` keeps following the terminal's width
    wide.print(table)


def print_json(data: object) -> None:
    """A `--json` result: plain JSON on stdout, never wrapped or styled by Rich (control and
    non-ASCII characters escaped)."""
    print(json.dumps(data, indent=2))


def cell(text: object, style: str = "") -> Text:
    """A table cell or message part that prints `text` literally."""
    return Text(clean(text), style=style)


class _ErrHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        err.print(cell(record.getMessage(), "yellow" if record.levelno >= logging.WARNING else ""))


def show_library_log(level: int = logging.INFO) -> None:
    """Let the library's notes (logger "pabench": a first-use training, a corrupt cache being
    rebuilt) reach the user on stderr; the library itself never prints."""
    logger = logging.getLogger("pabench")
    if not any(isinstance(h, _ErrHandler) for h in logger.handlers):
        logger.addHandler(_ErrHandler())
    logger.setLevel(level)
