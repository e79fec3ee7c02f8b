"""Every protocol and version in one place, and the lookups the rest of pabench uses.

The versions are data (`pabench.protocols.synth`, `pabench.protocols.real`, and the paper
reproductions in `pabench.protocols.papers`); each protocol's
`DEFAULT` is its current version. What follows is derived from them: the registry of current
specs, the newest version of a protocol while it is being made (`NEXT`), and every other
version (`LEGACY`), kept so old records stay reproducible.
"""

from __future__ import annotations

from typing import Literal

from pabench.errors import PabenchError
from pabench.protocols.papers import PAPER_PROTOCOLS
from pabench.protocols.real import REAL_PROTOCOLS
from pabench.protocols.spec import ProtocolSpec, ProtocolVersions
from pabench.protocols.synth import SYNTH_PROTOCOLS
from pabench.registry import Registry

Status = Literal["current", "next", "legacy"]

CATALOG: dict[str, type[ProtocolVersions]] = {
    versions.DEFAULT.spec.id: versions
    for versions in (*SYNTH_PROTOCOLS, *REAL_PROTOCOLS, *PAPER_PROTOCOLS)}
"""id -> its versions, in the order listings show them (pa-synth first, reproductions last)."""


def history(pid: str) -> list[tuple[ProtocolVersions, Status]]:
    """A protocol's versions oldest first, each with its status: `current` (its `DEFAULT`);
    `next`, the newest above it while its records are made entry by entry (`--protocol
    ID@VERSION`); `legacy`, any other, older or superseded before it became current."""
    members = list(CATALOG[pid])
    current, newest = CATALOG[pid].DEFAULT, members[-1]
    return [(m, "current" if m is current else "next"
             if m is newest and m.spec.version > current.spec.version else "legacy")
            for m in members]


def _check(pid: str, versions: type[ProtocolVersions]) -> None:
    """A member `V<n>` holds version n of this protocol, oldest first: the catalog's names
    are the versions a user types."""
    found = [(m.name, m.spec.id, m.spec.version) for m in versions]
    expected = [(f"V{v}", pid, v) for _, _, v in found]
    if found != expected or [v for *_, v in found] != sorted({v for *_, v in found}):
        raise ValueError(f"{versions.__name__}: members {found} are not V<n> of '{pid}' "
                         "with version n, oldest first")


PROTOCOLS: Registry[ProtocolSpec] = Registry("protocol")
NEXT: dict[str, ProtocolSpec] = {}
"""id -> the spec of the newest version while it is not yet current."""
LEGACY: dict[tuple[str, int], ProtocolSpec] = {}
"""(id, version) -> the spec that wrote records of an older (or superseded) version: `pabench
evaluate --protocol ID@VERSION` reproduces them; they are never ranked beside current ones."""


def _index() -> None:
    for pid, versions in CATALOG.items():
        _check(pid, versions)
        for member, status in history(pid):
            if status == "current":
                PROTOCOLS.add(pid, member.spec)
            elif status == "next":
                NEXT[pid] = member.spec
            else:
                LEGACY[pid, member.spec.version] = member.spec


_index()


def protocols_for(benchmark: str, reproductions: bool = True) -> list[ProtocolSpec]:
    """The benchmark's current protocols; `reproductions=False` leaves out the paper
    reproductions, which `--protocol all` does not run (each is its own long run)."""
    return [p for _, p in PROTOCOLS.items() if p.benchmark == benchmark
            and (reproductions or p.role != "reproduction")]


def get_protocol(name: str) -> ProtocolSpec:
    """`ID` (the current version) or `ID@VERSION`: any version in the catalog, a legacy one to
    reproduce old records or the next one to make its records."""
    pid, at, version = name.partition("@")
    current = PROTOCOLS.get(pid)
    if not at:
        return current
    versions = {str(m.spec.version): m.spec for m in CATALOG[pid]}
    if version not in versions:
        raise PabenchError(f"protocol '{pid}' has no version {version!r} "
                           f"(known: {', '.join(versions)})")
    return versions[version]
