"""The cut-down protocol the engine's tests run: they check wiring, caching and records, not
scores, so one seed, one small attacker and two epochs are enough."""

from __future__ import annotations

from typing import Any

from pabench.protocols import PROTOCOLS, ProtocolSpec, Schedule


def quick_protocol(protocol_id: str, base: str = "cross-dataset", **update: Any) -> ProtocolSpec:
    """`base` under the test id `protocol_id`, cut down; `update` overrides any field."""
    return PROTOCOLS.get(base).model_copy(update={
        "id": protocol_id, "seeds": (0,), "consistency_check": False, "attackers": ("tiny2d",),
        "schedule": Schedule(max_epochs=2, patience=1, min_epochs=1), "attacker_schedule": None,
        **update})
