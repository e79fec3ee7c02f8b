"""A record's numbers checked against each other, and an official record against its digest.

A record's schema bounds each number; this module checks what one number says about another,
with the definitions `pabench.evaluation.score` and `.run` compute them by, so that a number
edited by hand is caught: the headline privacy cMAP is its worst attacker's cMAP (F1 likewise),
averages are the means of their per-seed values, drops and the chance-normalised privacy follow
from the raw run, and each headline lies in its interval. Action top-1's interval is a bootstrap
of a mean and holds the mean; a multi-label action cMAP's (P-HVU) averages the classes each draw
has positives of, a set that changes from draw to draw, so on a small test set its interval can
miss the full set's cMAP and is not checked; privacy's takes the max over attackers inside each
draw, which can only raise it, so privacy headlines are checked against its upper end only.

Stored numbers are rounded (`schema`): scores to 4 decimals, fractions to 6, each with more
where fewer would change what the site shows. A stored value and one recomputed from stored
inputs may differ by their rounding: half a unit of each (`SCORE_ROUNDING`,
`FRACTION_ROUNDING`), carried through the formula by its partial derivatives.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from pabench.errors import PabenchError
from pabench.records.outcomes import outcomes_path, read_outcomes
from pabench.records.schema import AttackerResult, Metrics, Record

SCORE_ROUNDING = 0.5e-4
"""Half the last stored decimal of a score (percent)."""
FRACTION_ROUNDING = 0.5e-6
"""Half the last stored decimal of a fraction (a drop, normalised privacy)."""
_SLACK = 1e-9  # float arithmetic on the stored values


def record_digest(record: Record) -> str:
    """sha256 of the record's canonical JSON (sorted keys, no spaces, numbers as the record
    holds them, the raw run included), leaving out `verification.digest` itself and
    `samples`, which `leaderboard add` renames to their place in the results folder. Taken on
    a record as it reads back from its file (`pabench.records.files.as_stored`)."""
    doc = record.model_dump(exclude={"samples"})
    if doc.get("verification"):
        doc["verification"].pop("digest", None)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_record(record: Record, source: object) -> Record:
    """`record` if its numbers agree with each other (module docstring) and, where it is marked
    maintainer-verified, with its verification; else one line naming `source` and the field."""
    problems = _metrics_problems("metrics", record.metrics, record.attackers, record.raw)
    if record.raw is not None:
        problems += _metrics_problems("raw", record.raw, record.raw_attackers, record.raw)
    problems += _verification_problems(record)
    if problems:
        raise PabenchError(f"{source}: numbers do not agree with each other: {problems[0]} "
                           "(edited by hand? records are written by pabench)")
    return record


def check_outcomes(record: Record, record_file: Path) -> Record:
    """`record` if the outcomes file it names (scoring 2) is beside `record_file` with the
    sha256 it names; a missing or altered file is refused in one line naming it."""
    if record.outcomes is not None:
        read_outcomes(outcomes_path(record_file), record.outcomes, record_file)
    return record


def _far(stored: float, computed: float, tolerance: float) -> bool:
    return abs(stored - computed) > tolerance + _SLACK


def _metrics_problems(where: str, m: Metrics, attackers: list[AttackerResult],
                      raw: Metrics | None) -> list[str]:
    out = [f"{where}.{a.arch}.cmap {a.cmap} is not the mean of its per-seed cMAPs "
           f"{a.cmap_per_seed}" for a in attackers
           if a.cmap_per_seed and _far(a.cmap, float(np.mean(a.cmap_per_seed)),
                                       2 * SCORE_ROUNDING)]
    if m.action_per_seed and _far(m.action, float(np.mean(m.action_per_seed)),
                                  2 * SCORE_ROUNDING):
        out.append(f"{where}.action {m.action} is not the mean of action_per_seed "
                   f"{m.action_per_seed}")
    lo, hi = m.action_ci
    if m.action_metric == "top1" and not lo - _SLACK <= m.action <= hi + _SLACK:
        out.append(f"{where}.action {m.action} lies outside its interval [{lo}, {hi}]")
    if attackers:
        by_arch = {a.arch: a for a in attackers}
        worst = max(a.cmap for a in attackers)
        if m.worst_attacker not in by_arch or by_arch[m.worst_attacker].cmap != worst:
            out.append(f"{where}.worst_attacker {m.worst_attacker} is not the attacker with "
                       f"the highest cMAP ({worst})")
        checks = [("privacy_cmap", m.privacy_cmap, worst),
                  ("privacy_f1", m.privacy_f1, max(a.f1 for a in attackers)),
                  ("privacy_cmap_mean", m.privacy_cmap_mean,
                   float(np.mean([a.cmap for a in attackers]))),
                  ("privacy_f1_mean", m.privacy_f1_mean,
                   float(np.mean([a.f1 for a in attackers])))]
        out += [f"{where}.{name} {value} is not {computed:.4f} as its attackers give"
                for name, value, computed in checks
                if _far(value, computed, 2 * SCORE_ROUNDING)]
    for name, value, ci in (("privacy_cmap", m.privacy_cmap, m.privacy_cmap_ci),
                            ("privacy_f1", m.privacy_f1, m.privacy_f1_ci)):
        if value > ci[1] + _SLACK:
            out.append(f"{where}.{name} {value} lies above its interval [{ci[0]}, {ci[1]}]")
    if raw is not None:
        out += _derived_problems(where, m, raw)
    return out


def _derived_problems(where: str, m: Metrics, raw: Metrics) -> list[str]:
    """The drops and normalised privacy, recomputed from stored scores (`run.relative_drop`,
    `run.normalised`); each partial derivative times a score's rounding is the tolerance."""
    out = []
    for name, value, r, a in (("action_drop", m.action_drop, raw.action, m.action),
                              ("privacy_drop", m.privacy_drop, raw.privacy_cmap,
                               m.privacy_cmap)):
        if value is not None and r > 0:
            tol = FRACTION_ROUNDING + SCORE_ROUNDING * (1 / r + a / r**2)
            if _far(value, (r - a) / r, tol):
                out.append(f"{where}.{name} {value} is not {(r - a) / r:.6f} as the raw run "
                           "gives")
    base = m.base_cmap
    if m.privacy_norm is not None and base is not None and raw.privacy_cmap - base > 0:
        p, span = m.privacy_cmap, raw.privacy_cmap - base
        computed = (p - base) / span
        tol = FRACTION_ROUNDING + SCORE_ROUNDING * (
            1 + abs(p - base) / span + abs(p - raw.privacy_cmap) / span) / span
        if _far(m.privacy_norm, computed, tol):
            out.append(f"{where}.privacy_norm {m.privacy_norm} is not {computed:.6f} as the "
                       "raw run and base_cmap give")
    return out


def _verification_problems(record: Record) -> list[str]:
    v, b = record.verification, record.benchmark
    if v is None:
        return []
    if b.test_seed != "private" or b.test_seed_commitment != v.commitment:
        return ["verification: its commitment is not the benchmark's private test seed's"]
    if v.digest != record_digest(record):
        return [f"verification.digest {v.digest[:12]}… is not the record's "
                f"({record_digest(record)[:12]}…): changed after verification"]
    return []
