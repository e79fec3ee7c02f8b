"""`leaderboard archive`: the official folder keeps each protocol's current version only.

Records of older protocol versions move, byte for byte with their sample strips, outcomes and raw
references, into an archive folder laid out as a results folder (`leaderboard build --results
DIR` renders it) with a dataset card, which `repo_id` pushes to the Hugging Face Hub as a
dataset repository. The records that stay are rewritten in the current schema (slim: raw
reference by hash, rounded numbers) and references no record names are removed. Everything is
read and checked, and the archive written and read back, before the results folder changes.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData, HfApi
from huggingface_hub.errors import HFValidationError, HTTPError
from huggingface_hub.utils import validate_repo_id

from pabench.errors import PabenchError
from pabench.io import atomic_write_bytes, atomic_write_text
from pabench.leaderboard.samples import sample_files
from pabench.leaderboard.tables import Entry, build_tables, load_records
from pabench.records import REFERENCES, stored, write_record
from pabench.records.outcomes import outcomes_path


@dataclass(frozen=True)
class ArchiveSummary:
    archived: int  # records moved to the archive folder
    rewritten: int  # records of the results folder whose file changed
    kept: int  # records left in the results folder
    commit_url: str | None  # the Hub commit, when pushed


def _files(results: Path, entry: Entry) -> list[Path]:
    """An archived entry's files: the record, its samples, its outcomes (scoring 2) and the
    reference it names."""
    files = [entry.path, *sample_files(entry.path, entry.record)]
    if entry.record.outcomes is not None:  # load_records checked the file and its hash
        files.append(outcomes_path(entry.path))
    sha = json.loads(entry.path.read_bytes()).get("raw_reference")
    if isinstance(sha, str):  # a v5 record (read_record checked the file and its hash)
        files.append(entry.path.parent / REFERENCES / f"{sha}.json")
    return [f.resolve().relative_to(results.resolve()) for f in files]


def card(folder: Path) -> DatasetCard:
    """The archive's dataset card: what it holds, per table, and how to read it."""
    tables = Counter(rec.table_id for _, rec in load_records(folder))
    rows = "\n".join(f"| `{t}` | {n} |" for t, n in sorted(tables.items()))
    data = DatasetCardData(pretty_name="pabench results archive", tags=["pabench", "leaderboard"],
                           viewer=False)
    text = (
        "# pabench results archive\n\n"
        "Records of protocol versions the pabench leaderboard no longer ranks, as they were "
        "published (`pabench leaderboard archive` moved them here from `leaderboard/results`). "
        "Each JSON file is one record (`pabench.records`): older schema versions are upgraded "
        "on read, and a schema v5 record names its raw-data run by the sha256 of "
        f"`{REFERENCES}/<sha256>.json`. Sample strips are in `samples/`.\n\n"
        "Read them with `pabench leaderboard build --results DIR --out SITE` or "
        "`pabench leaderboard show ID@VERSION --results DIR`.\n\n"
        f"| table (benchmark__preset__protocol__version) | records |\n|---|---|\n{rows}\n"
    )
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n{text}")


def _check_repo_id(repo_id: str) -> None:
    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise PabenchError(f"--repo-id {repo_id!r} is not a Hub repository id, ORG/NAME "
                           f"({str(e).splitlines()[0]})") from None


def _push(folder: Path, repo_id: str, n: int) -> str:
    """Upload the archive folder to the dataset repository (created if needed); files already
    there and not in the folder stay, so archives of several runs accumulate."""
    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
        info = api.upload_folder(folder_path=folder, repo_id=repo_id, repo_type="dataset",
                                 commit_message=f"pabench: archive {n} records")
    except (HTTPError, OSError, ValueError) as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        hint = " (check the Hub token: HF_TOKEN or `hf auth login`)" if status in (401, 403) \
            else ""
        raise PabenchError(f"push to {repo_id} failed: {str(e).strip().splitlines()[0]}"
                           f"{hint}") from None
    return info.commit_url


def archive(results: Path, to: Path, repo_id: str | None = None) -> ArchiveSummary:
    """Move the records of archived tables (`Table.listing`) from `results` to `to`, rewrite
    the rest in the current schema, drop unnamed references, and with `repo_id` push `to`."""
    results, to = Path(results), Path(to)
    if to.resolve() == results.resolve() or to.resolve().is_relative_to(results.resolve()):
        raise PabenchError(f"--to {to}: the archive must lie outside the results folder {results}")
    if repo_id is not None:
        _check_repo_id(repo_id)
    tables = build_tables(load_records(results))
    old = [e for t in tables if t.listing == "archived" for e in t.entries]
    keep = [e for t in tables if t.listing != "archived" for e in t.entries]
    moves = sorted({rel for e in old for rel in _files(results, e)})
    for rel in moves:  # refuse before writing anything
        dest = to / rel
        if dest.exists() and dest.read_bytes() != (results / rel).read_bytes():
            raise PabenchError(f"{dest}: already in the archive with other content; "
                               "pick another --to")
    for rel in moves:
        atomic_write_bytes(to / rel, (results / rel).read_bytes())
    atomic_write_text(to / "README.md", str(card(to)))
    back = {p.resolve() for p, _ in load_records(to)}  # what the archive holds reads back
    missing = [e.path.name for e in old if (to / e.path.relative_to(results)).resolve() not in back]
    if missing:
        raise PabenchError(f"{to}: archived records did not read back: {', '.join(missing)}")
    url = _push(to, repo_id, len(old)) if repo_id else None
    rewritten = 0
    for e in keep:
        before = e.path.read_bytes()
        write_record(e.record, e.path, replace=True)
        rewritten += e.path.read_bytes() != before
    named = {e.path.parent / REFERENCES / f"{sha}.json"
             for e in keep if (sha := stored(e.record)[1])}
    for rel in moves:
        if rel.parent.name != REFERENCES:
            (results / rel).unlink()
    for ref in sorted(results.rglob(f"{REFERENCES}/*.json")):
        if ref not in named:
            ref.unlink()
    for folder in sorted({(results / rel).parent for rel in moves}, reverse=True):
        if folder != results and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return ArchiveSummary(len(old), rewritten, len(keep), url)

