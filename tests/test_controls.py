"""The controls protocol v2 must pass, checked on the committed records that `pabench evaluate`
wrote (as mteb tests every task's results): a lossless anonymizer scores like identity, an
all-black one sits at chance on both axes. A protocol where `1 - x` looks private measures
distribution shift, not privacy, and must not be ranked. The next version's records, made entry
by entry, are held to the same controls once its control records are in."""

from __future__ import annotations

from pathlib import Path

import pytest

from pabench.protocols import NEXT, PROTOCOLS
from pabench.records import Record, read_record

RESULTS = Path(__file__).resolve().parents[1] / "leaderboard" / "results"
RANKED = [p.id for _, p in PROTOCOLS.items() if p.benchmark == "pa-synth" and p.role == "ranked"]
LOSSLESS = ("invert", "channel-permute")


def _records(upcoming: bool = False) -> dict[tuple[str, str], Record]:
    out = {}
    for path in sorted(RESULTS.glob("*.json")):
        r = read_record(path)
        spec = NEXT.get(r.protocol.id) if upcoming else PROTOCOLS.get(r.protocol.id)
        if r.benchmark.name == "pa-synth" and spec is not None and r.protocol.version == (
                spec.version) and r.submission.format == "baseline":
            out[r.protocol.id, r.submission.name] = r
    return out


RECORDS = _records()
NEXT_RECORDS = _records(upcoming=True)
CONTROLS = ("identity", "black", *LOSSLESS)
# the current version must have every control; the next version's table, made entry by entry,
# is checked once its control records are all there (they are made first, in one run)
CASES = [pytest.param(RECORDS, p, id=p) for p in RANKED] + [
    pytest.param(NEXT_RECORDS, p, id=f"{p}@{NEXT[p].version}") for p in RANKED
    if all((p, name) in NEXT_RECORDS for name in CONTROLS)]


def test_every_ranked_protocol_has_control_records():
    have = {p for p in RANKED if (p, "identity") in RECORDS}
    assert have == set(RANKED), f"no v2 control records for {sorted(set(RANKED) - have)}"


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


@pytest.mark.parametrize(("records", "protocol"), CASES)
def test_lossless_controls_score_like_identity(records, protocol):
    ident = records.get((protocol, "identity"))
    assert ident is not None, f"no committed identity record for {protocol}"
    for name in LOSSLESS:
        rec = records.get((protocol, name))
        assert rec is not None, f"no committed {name} record for {protocol}"
        m, i = rec.metrics, ident.metrics
        assert _overlap(m.privacy_cmap_ci, i.privacy_cmap_ci), (
            name, m.privacy_cmap, m.privacy_cmap_ci, i.privacy_cmap, i.privacy_cmap_ci)
        assert _overlap(m.action_ci, i.action_ci), (name, m.action, i.action)


@pytest.mark.parametrize(("records", "protocol"), CASES)
def test_black_is_at_chance_on_both_axes(records, protocol):
    rec = records.get((protocol, "black"))
    assert rec is not None, f"no committed black record for {protocol}"
    m = rec.metrics
    assert m.action_chance is not None and m.base_cmap is not None
    assert m.action <= m.action_chance + 5, (m.action, m.action_chance)
    assert m.privacy_cmap <= m.base_cmap + 3, (m.privacy_cmap, m.base_cmap)


@pytest.mark.parametrize(("records", "protocol"), CASES)
def test_identity_is_the_raw_reference_and_weak_attackers_are_named(records, protocol):
    ident = records[protocol, "identity"]
    assert ident.raw is not None and ident.raw.privacy_cmap == ident.metrics.privacy_cmap
    assert ident.metrics.privacy_norm == pytest.approx(1.0)
    assert sum(bool(a.strong) for a in ident.attackers) >= 2  # the worst case is not one model
    for a in ident.attackers:
        assert (a.strong is False) == any(f.startswith(f"weak attacker: {a.arch} ")
                                          for f in ident.flags)
        # every seed of every attacker left a chosen curve
        assert sum(c.chosen for c in a.curves) == len(ident.seeds) >= 3
