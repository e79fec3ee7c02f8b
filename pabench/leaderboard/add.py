"""`leaderboard add`: the one explicit step that puts records into the official results folder.

`pabench evaluate` writes to a user folder; a maintainer then adds the records here. Every
record is read and checked (its numbers against each other too: `check_record`), the whole
results folder is checked as it would be after the add (as `leaderboard build` will check it),
and only then is anything written, so a refused add changes nothing. A record of an entry
already in the folder replaces that entry's file only when it is the same submission, or with
`replace`; either way the caller is told. A record written from uncommitted code (its `git`
ends in `-dirty`) is refused: an official number must be reproducible from a commit. A
record's outcomes file (scoring 2: `pabench.records.outcomes`) is checked and copied with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pabench.errors import PabenchError
from pabench.io import atomic_write_bytes
from pabench.leaderboard.samples import sample_files
from pabench.leaderboard.tables import build_tables, load_records
from pabench.records import (
    Record,
    check_outcomes,
    check_record,
    check_replace,
    read_record,
    write_record,
)
from pabench.records.outcomes import outcomes_path


@dataclass(frozen=True)
class Added:
    """One record added (or replacing an existing file) in the results folder."""

    source: Path
    path: Path
    replaced: bool


@dataclass
class _Plan:
    source: Path
    path: Path
    record: Record  # with `samples` renamed to their place in the results folder
    samples: list[tuple[Path, Path]]  # (source file, destination)
    replaced: bool


def _sample_names(stem: str, n: int) -> list[str]:
    """Where an entry's strips go: `samples/STEM.png` as `pabench evaluate` names its one strip,
    then `samples/STEM/I.png`; one file per entry and index, whatever the names contain."""
    return [f"samples/{stem}.png" if i == 0 else f"samples/{stem}/{i}.png" for i in range(n)]


def add_records(paths: Iterable[Path], results: Path, *, replace: bool = False) -> list[Added]:
    """Validate records and copy them, with their sample PNGs, into `results`.

    A new entry's file is named by its `entry_id` (unambiguous, protocol version included);
    an entry already in the folder keeps its file. Sample paths are rewritten to the entry's
    own names, so a record cannot overwrite another entry's strip.
    """
    results = Path(results)
    if results.exists() and not results.is_dir():
        raise PabenchError(f"{results}: results folder is not a folder")
    existing = load_records(results) if results.exists() else []
    by_entry = {rec.entry_id.casefold(): path for path, rec in existing}
    owner = {(results / rel).resolve(): path for path, rec in existing for rel in rec.samples}
    plans: dict[Path, _Plan] = {}
    for source in map(Path, paths):
        record = check_outcomes(check_record(read_record(source), source), source)
        git = record.pabench.get("git", "")
        if git.endswith("-dirty"):
            raise PabenchError(f"{source}: written from uncommitted code (git {git}); official "
                               "records come from a committed tree: commit, then evaluate again")
        sources = sample_files(source, record)
        path = by_entry.get(record.entry_id.casefold(), results / f"{record.entry_id}.json")
        if path in plans:
            raise PabenchError(f"{source}: same entry as {plans[path].source} "
                               f"({record.entry_id}); add one of them")
        replaced = check_replace(record, path, replace=replace)
        names = _sample_names(path.stem, len(sources))
        dests = [results / n for n in names]
        for dest in dests:
            other = owner.get(dest.resolve(), path)
            if other != path:
                raise PabenchError(f"{source}: its sample would overwrite {dest}, which "
                                   f"belongs to {other}")
        plans[path] = _Plan(source, path, record.model_copy(update={"samples": names}),
                            list(zip(sources, dests, strict=True)), replaced)
    # the folder as the next build will see it: duplicate entries are refused here, not there
    after = {path: rec for path, rec in existing}
    after.update({path: p.record for path, p in plans.items()})
    build_tables(sorted(after.items()), paired=False)
    added = []
    for p in plans.values():
        copies = [*p.samples, *([(outcomes_path(p.source), outcomes_path(p.path))]
                                if p.record.outcomes is not None else [])]
        for src, dest in copies:
            if src.resolve() != dest.resolve():
                atomic_write_bytes(dest, src.read_bytes())
        write_record(p.record, p.path, replace=replace)
        added.append(Added(p.source, p.path, p.replaced))
    return added
