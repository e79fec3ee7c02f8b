"""Rich progress bars shared by the commands."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pabench.cli.console import err


@contextmanager
def progress_bar() -> Iterator:
    """Yield a callback `(stage, done, total)` that drives one bar per stage, drawn on stderr
    so that stdout keeps only the result. The display starts with the first stage, so a
    command that fails before any work leaves its one-line error alone on stderr."""
    bars: dict[str, int] = {}
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=False,
    )

    def update(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            if not bars:
                progress.start()
            bars[stage] = progress.add_task(stage, total=total)
        progress.update(bars[stage], completed=done, total=total)

    try:
        yield update
    finally:
        if bars:  # stopping a display never started would still print a blank line
            progress.stop()
