"""Where the official records are read from: a clone's `leaderboard/`, else pabench's own copy.

The wheel and the sdist carry the repository's `leaderboard/results` and `leaderboard/reported`
as package data under `pabench/official/` (setup.py maps the folder), so `pabench leaderboard
build` and `show` need no clone. In a clone the working copy wins: the records `leaderboard add`
just copied in are the ones read.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

from pabench.errors import PabenchError

SHIPPED = "official"  # the package-data folder under pabench/ that holds the shipped copy
Kind = Literal["results", "reported"]


def _repository() -> Path | None:
    """The clone the imported pabench lives in (an editable install run from elsewhere)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def official_folder(kind: Kind) -> Path:
    """`./leaderboard/KIND` when run in a clone, else the clone pabench is imported from, else
    the copy installed with the package."""
    here = Path("leaderboard") / kind
    if here.is_dir():
        return here
    repo = _repository()
    if repo is not None and (repo / "leaderboard" / kind).is_dir():
        return repo / "leaderboard" / kind
    shipped = resources.files("pabench") / SHIPPED / kind
    if shipped.is_dir():
        return Path(str(shipped))
    raise PabenchError(f"no official {kind} folder: ./leaderboard/{kind} does not exist and this "
                       f"pabench was installed without its records; pass --{kind} DIR")
