"""Protocols as versioned data: which sets, clip spec, target/attacker models, schedule, seeds.

`spec` defines what a version is, `synth` and `real` hold every version of every protocol as
data, `catalog` derives the lookups; `pabench protocols list|show|docs` prints them.
"""

from pabench.protocols.catalog import (
    CATALOG,
    LEGACY,
    NEXT,
    PROTOCOLS,
    Status,
    get_protocol,
    history,
    protocols_for,
)
from pabench.protocols.spec import (
    REAL_FRAMES_PER_CLIP,
    ClipSpec,
    DataRef,
    ProtocolSpec,
    ProtocolVersions,
    Release,
    Schedule,
)
from pabench.protocols.synth import SYNTH_SCHEDULE

__all__ = [
    "CATALOG", "LEGACY", "NEXT", "PROTOCOLS", "REAL_FRAMES_PER_CLIP", "SYNTH_SCHEDULE", "ClipSpec",
    "DataRef", "ProtocolSpec", "ProtocolVersions", "Release", "Schedule", "Status", "get_protocol",
    "history", "protocols_for",
]
