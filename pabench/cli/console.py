"""The consoles every command prints through: user text is shown, never interpreted.

Names, paths and error messages come from files and arguments a user (or an attacker) chose, so
Rich markup and emoji codes are off, and control characters are shown escaped rather than sent
to the terminal. Styling is added with `Text` objects by the commands themselves.
"""

from __future__ import annotations

import logging
import re

from rich.console import Console
from rich.text import Text

out = Console(markup=False, emoji=False, highlight=False)
err = Console(stderr=True, markup=False, emoji=False, highlight=False, soft_wrap=True)

# C0/C1 controls (ESC, BEL, CR, ...), and invisible or direction-changing format characters
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                     r"\u2066-\u2069\ufeff]")


def clean(text: object) -> str:
    """`text` with every control or invisible character written as a visible escape."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode(), str(text))


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
