"""Per-video outcomes of one evaluation (protocols with `scoring: 2`), stored beside its record.

Intervals of two entries overlap even where the entries differ on nearly every video; a paired
comparison resamples the *same* test videos and seeds for both (`pabench.leaderboard.paired`),
which needs each entry's outcome on each video. `NAME.outcomes.npz` (numpy's zip of arrays,
read with `allow_pickle=False`) holds them; the record names the file's sha256 (`outcomes`), so
an edited or missing file is refused (`pabench.records.integrity.check_outcomes`).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pabench.errors import PabenchError

SUFFIX = ".outcomes.npz"
MAX_OUTCOMES_BYTES = 256 * 1024 * 1024
_ARRAYS = ("seeds", "action_videos", "privacy_videos", "action", "action_labels", "attackers",
           "privacy", "privacy_labels")


def videos_hash(video_ids: list[str]) -> str:
    """sha256 of test video ids in order: two entries pair only on the same videos."""
    return hashlib.sha256("\n".join(video_ids).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Outcomes:
    """`action`: per seed, each action test video's predicted class [S, Na] (top-1), or its
    class probabilities [S, Na, C] where the action metric is cMAP; `privacy`: per attacker
    (`attackers`), per seed, each privacy test video's probability of every scored attribute
    [M, S, Np, A], as float16; the labels they are scored against; the video ids' hashes."""

    seeds: np.ndarray
    action_videos: str
    privacy_videos: str
    action: np.ndarray
    action_labels: np.ndarray
    attackers: tuple[str, ...]
    privacy: np.ndarray
    privacy_labels: np.ndarray

    @property
    def multilabel(self) -> bool:
        return self.action_labels.ndim == 2

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(
            buffer, seeds=self.seeds, action_videos=np.array(self.action_videos),
            privacy_videos=np.array(self.privacy_videos), action=self.action,
            action_labels=self.action_labels, attackers=np.array(self.attackers, dtype=str),
            privacy=self.privacy, privacy_labels=self.privacy_labels)
        return buffer.getvalue()

    def pairs_with(self, other: Outcomes) -> bool:
        """Whether `other` was scored on the same videos, seeds and attackers."""
        return (self.action_videos, self.privacy_videos, self.attackers) == (
            other.action_videos, other.privacy_videos, other.attackers) and np.array_equal(
            self.seeds, other.seeds)


def outcomes_path(record_file: Path) -> Path:
    """`NAME.outcomes.npz` beside the record `NAME.json`."""
    record_file = Path(record_file)
    return record_file.with_name(record_file.stem + SUFFIX)


def parse_outcomes(raw: bytes, source: object) -> Outcomes:
    """Outcomes from the bytes of an outcomes file; anything else is one line naming `source`."""
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            missing = sorted(set(_ARRAYS) - set(npz.files))
            if missing:
                raise PabenchError(f"{source}: not an outcomes file: no array {missing[0]!r}")
            a = {k: npz[k] for k in _ARRAYS}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise PabenchError(f"{source}: not an outcomes file ({str(e).splitlines()[0]})"
                           ) from None
    out = Outcomes(a["seeds"], str(a["action_videos"]), str(a["privacy_videos"]), a["action"],
                   a["action_labels"], tuple(str(x) for x in a["attackers"]), a["privacy"],
                   a["privacy_labels"])
    s, (n_a, n_p) = len(out.seeds), (len(out.action_labels), len(out.privacy_labels))
    shapes_ok = (out.action.shape[:2] == (s, n_a) and out.action.ndim == out.action_labels.ndim + 1
                 and out.privacy.shape == (len(out.attackers), s, n_p, out.privacy_labels.shape[1])
                 and np.isfinite(out.privacy).all() and np.isfinite(out.action).all())
    if not shapes_ok or out.privacy_labels.ndim != 2:
        raise PabenchError(f"{source}: outcomes arrays do not fit each other (seeds {s}, "
                           f"action {out.action.shape}, privacy {out.privacy.shape})")
    return out


def read_outcomes(path: Path, sha256: str, record_file: object) -> Outcomes:
    """The outcomes file `record_file` names by `sha256`: refused, naming it, when it is
    missing, too large, or its content no longer has that hash."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_OUTCOMES_BYTES:
            raise PabenchError(f"{path}: too large for an outcomes file (at most "
                               f"{MAX_OUTCOMES_BYTES // 2**20} MiB)")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PabenchError(f"{path}: outcomes file named by {record_file} is missing") from None
    except OSError as e:
        raise PabenchError(f"{path}: cannot read outcomes ({e.strerror or e})") from None
    actual = hashlib.sha256(raw).hexdigest()
    if actual != sha256:
        raise PabenchError(f"{path}: content has sha256 {actual[:12]}…, not the {sha256[:12]}… "
                           f"{record_file} names (the file was changed)")
    return parse_outcomes(raw, path)
