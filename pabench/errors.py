"""One exception type whose message is the single line a user sees."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PabenchError(Exception):
    """A user-facing error: the CLI prints `error: <message>` and exits non-zero."""


def unknown_name(kind: str, name: str, valid: Iterable[str]) -> PabenchError:
    """Build the error for an unknown registry key, suggesting the closest valid one."""
    valid = sorted(valid)
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.4)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return PabenchError(f"unknown {kind} '{name}'.{hint} Valid: {', '.join(valid)}")
