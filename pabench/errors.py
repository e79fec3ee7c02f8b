"""One exception type whose message is the single line a user sees."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PabenchError(Exception):
    """A user-facing error: the CLI prints `error: <message>` and exits non-zero."""


MAX_MESSAGE = 500


def one_line(e: object, limit: int = MAX_MESSAGE) -> str:
    """A message as the single line a user sees: line breaks joined, cut to `limit` characters
    (a hostile file's name or content must not flood the terminal)."""
    text = " ".join(part.strip() for part in str(e).splitlines() if part.strip())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def unknown_name(kind: str, name: str, valid: Iterable[str]) -> PabenchError:
    """Build the error for an unknown registry key, suggesting the closest valid one."""
    valid = sorted(valid)
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.4)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return PabenchError(f"unknown {kind} '{name}'.{hint} Valid: {', '.join(valid)}")
