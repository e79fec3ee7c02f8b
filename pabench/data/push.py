"""Publish a built dataset folder to the Hugging Face Hub as a dataset repository.

Only what `load_dataset` and pabench's loader read is uploaded (the card, `pabench.json`, the
parquet splits and the media); build reports and anything else in the folder stay local. The
token comes from huggingface_hub's usual sources (HF_TOKEN, `hf auth login`).
"""

from __future__ import annotations

from pathlib import Path

import httpx2  # huggingface_hub's HTTP client: its transport errors are not OSErrors
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError

from pabench.data.hub import META_FILE, read_meta
from pabench.errors import PabenchError

PUSHED = ("README.md", META_FILE, "data/*.parquet", "videos/**/*")


def files_to_push(folder: Path) -> list[str]:
    """Paths (relative, POSIX) of every file a push uploads, sorted."""
    folder = Path(folder)
    read_meta(folder)  # refuses folders that are not a finished build
    found = {p.relative_to(folder).as_posix()
             for pattern in PUSHED for p in folder.glob(pattern) if p.is_file()}
    if "README.md" not in found:
        raise PabenchError(f"{folder}: no README.md dataset card; rebuild the dataset")
    return sorted(found)


def push_dataset(folder: Path, repo_id: str, *, private: bool = False,
                 revision: str | None = None) -> str:
    """Create (or reuse) the dataset repo and upload the folder in one commit; returns its URL."""
    folder = Path(folder)
    files = files_to_push(folder)
    api = HfApi()
    operations = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(folder / rel))
                  for rel in files]
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if revision:
            api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True)
        info = api.create_commit(
            repo_id, operations, repo_type="dataset", revision=revision,
            commit_message=f"pabench: upload {read_meta(folder).name} ({len(files)} files)",
        )
    except (HfHubHTTPError, OSError, httpx2.HTTPError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise PabenchError(f"push to {repo_id} failed: {first}") from None
    return info.commit_url
