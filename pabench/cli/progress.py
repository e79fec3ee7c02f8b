"""Rich progress bars shared by the commands."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import monotonic

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pabench.cli.console import cell, err

LINE_EVERY = 60.0  # seconds between two plain progress lines of one stage


def _lines() -> Callable[[str, int, int], None]:
    """Progress as plain lines: Rich redraws its bars only on a terminal (elsewhere it prints
    them once, at the end), so a log file or a batch job's output would hold nothing until an
    hour-long evaluation ends. One line when a stage starts, at most one a minute while it
    runs, and one when it ends."""
    start = monotonic()
    last: dict[str, tuple[float, int]] = {}  # per stage: when its last line was, and its count

    def update(stage: str, done: int, total: int) -> None:
        now = monotonic()
        if stage in last:
            when, shown = last[stage]
            if done == shown or (done < total and now - when < LINE_EVERY):
                return
        last[stage] = now, done
        err.print(cell(f"{stage}: {done}/{total} ({now - start:.0f} s)"))

    return update


@contextmanager
def progress_bar() -> Iterator:
    """Yield a callback `(stage, done, total)` that drives one bar per stage, drawn on stderr
    so that stdout keeps only the result (plain lines where stderr is no terminal). The display
    starts with the first stage, so a command that fails before any work leaves its one-line
    error alone on stderr."""
    if not err.is_terminal:
        yield _lines()
        return
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
