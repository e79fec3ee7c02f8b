"""Exit statuses, as click sets them for its own errors: 2 for a bad command line, 1 for a
failure while doing the work. Scripts can then tell "fix the command" from "it broke"."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pabench.errors import PabenchError

USAGE_EXIT = 2
FAILURE_EXIT = 1


class UsageError(PabenchError):
    """A PabenchError about the command line itself (an unknown name, a bad value, a missing
    input file), raised before any work starts."""


@contextmanager
def checking_arguments() -> Iterator[None]:
    """Mark the PabenchErrors of the argument checks a command runs before its work as usage
    errors; the library raises plain PabenchErrors, not knowing where a value came from."""
    try:
        yield
    except UsageError:
        raise
    except PabenchError as e:
        raise UsageError(*e.args) from e


def exit_status(error: PabenchError) -> int:
    return USAGE_EXIT if isinstance(error, UsageError) else FAILURE_EXIT
