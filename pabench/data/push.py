"""Publish a built dataset folder to the Hugging Face Hub as a dataset repository.

Only what `load_dataset` and pabench's loader read is uploaded (the card, `pabench.json`, the
parquet splits and the media of the splits `pabench.json` lists); build reports and anything
else in the folder stay local. The folder must be exactly what the build wrote: every split must
match its fingerprint in `pabench.json` (so a half-built or edited folder is refused) and no file
may be a link or lie outside the folder (so a planted link cannot upload a file from elsewhere).
The token comes from huggingface_hub's usual sources (HF_TOKEN, `hf auth login`).
"""

from __future__ import annotations

from pathlib import Path

import httpx2  # huggingface_hub's HTTP client: its transport errors are not OSErrors
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError, HFValidationError
from huggingface_hub.utils import validate_repo_id

from pabench.data.hub import META_FILE, read_meta, split_fingerprint
from pabench.errors import PabenchError


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else type(e).__name__


def files_to_push(folder: Path) -> list[str]:
    """Paths (relative, POSIX) of every file a push uploads, sorted; refuses a folder that is
    not exactly a finished build."""
    folder = Path(folder)
    meta = read_meta(folder)  # refuses folders that are not a build at all
    root = folder.resolve()
    candidates = [folder / "README.md", folder / META_FILE]
    for split in meta.splits:
        parquet = folder / "data" / f"{split}.parquet"
        if not parquet.is_file():
            raise PabenchError(f"{folder}: {META_FILE} lists split '{split}' but "
                               f"{parquet.relative_to(folder)} is missing; rebuild the dataset")
        candidates += [parquet, *sorted((folder / "videos" / split).glob("**/*"))]
    found = []
    for path in candidates:
        if path.is_symlink() or not path.resolve().is_relative_to(root):
            raise PabenchError(f"{path}: refusing to push a link or a file outside {folder}")
        if path.is_file():
            found.append(path.relative_to(folder).as_posix())
    if "README.md" not in found:
        raise PabenchError(f"{folder}: no README.md dataset card; rebuild the dataset")
    for split in meta.splits:
        if meta.fingerprints.get(split) != split_fingerprint(folder, split):
            raise PabenchError(f"{folder}: split '{split}' does not match its fingerprint in "
                               f"{META_FILE} (half-built or changed since the build); rebuild it")
    return sorted(found)


def push_dataset(folder: Path, repo_id: str, *, private: bool = False,
                 revision: str | None = None) -> tuple[str, int]:
    """Create (or reuse) the dataset repo and upload the folder in one commit; returns the
    commit URL and the number of files uploaded."""
    folder = Path(folder)
    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise PabenchError(f"--repo-id {repo_id!r} is not a Hub repository id, ORG/NAME "
                           f"({_first_line(e)})") from None
    files = files_to_push(folder)
    name = read_meta(folder).name
    api = HfApi()
    try:
        operations = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(folder / rel))
                      for rel in files]
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if revision:
            api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True)
        info = api.create_commit(
            repo_id, operations, repo_type="dataset", revision=revision,
            commit_message=f"pabench: upload {name} ({len(files)} files)",
        )
    except UnicodeEncodeError:  # HTTP headers are ASCII: the token is the header users type
        raise PabenchError(f"push to {repo_id} failed: the Hub token (HF_TOKEN or `hf auth "
                           "login`) is not ASCII; is it mistyped?") from None
    except (HfHubHTTPError, OSError, httpx2.HTTPError, httpx2.InvalidURL, ValueError) as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        hint = " (check the Hub token: HF_TOKEN or `hf auth login`)" if status in (401, 403) \
            else ""
        raise PabenchError(f"push to {repo_id} failed: {_first_line(e)}{hint}") from None
    return info.commit_url, len(files)
