"""Every registered protocol names models and datasets that exist (as MTEB tests every task)."""

from __future__ import annotations

import pytest

from pabench.data.registry import BENCHMARKS, DATASETS
from pabench.evaluation.config import BENCHMARK_NAMES
from pabench.models import MODELS
from pabench.protocols import PROTOCOLS


@pytest.mark.parametrize("pid", PROTOCOLS.names())
def test_protocol_refers_to_registered_models_and_datasets(pid: str) -> None:
    p = PROTOCOLS.get(pid)
    assert p.benchmark in BENCHMARK_NAMES
    assert MODELS.get(p.target).kind == "video", "the utility target sees clips"
    assert p.attackers and len(set(p.attackers)) == len(p.attackers)
    for arch in p.attackers:
        assert arch in MODELS
    for ref in (p.action_train, p.action_test, p.privacy_train, p.privacy_test):
        assert ref.dataset in DATASETS
        if p.benchmark == "pa-synth":
            assert ref.dataset in BENCHMARKS["pa-synth"]
    assert p.seeds and p.schedule.min_epochs <= p.schedule.max_epochs
    if p.novel:
        assert p.novel_sides

