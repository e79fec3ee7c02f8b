"""A method trained with several seeds: evaluation seed k scores replica k, so the record
covers f_A's training variance (a learned row is otherwise one training seed's draw)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from quick import quick_protocol
from torch import nn

from pabench.anonymizers import ANONYMIZERS, AnonymizerSpec, BuildContext, Identity
from pabench.errors import PabenchError
from pabench.evaluation import EvaluationConfig, evaluate
from pabench.evaluation.config import usable_cores
from pabench.evaluation.run import resolve_submission
from pabench.records import SCHEMA_VERSION, Replica, read_record, write_record
from pabench.submission import export_submission

TWO_SEEDS = quick_protocol("test-replicas", seeds=(0, 1))
COMMITTED = Path(__file__).resolve().parents[1] / "leaderboard" / "results"


class Copy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1.0


class Black(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.0


def test_each_seed_scores_its_own_replica(synth_tiny, tmp_path):
    """Seed 0 of the pooled record is the copy's own seed-0 run and seed 1 the black
    replica's own seed-1 run, number for number. The pooled run trains side by side; the
    single-seed runs, sequential at the workers' thread count, reuse its cached models."""
    copy = export_submission(Copy(), tmp_path / "copy.pt2", frames=8, size=32)
    black = export_submission(Black(), tmp_path / "dark.pt2", frames=8, size=32)
    kw = dict(preset="tiny", data_dir=synth_tiny)
    rec = evaluate(copy, TWO_SEEDS, replicas=(black,), output_dir=tmp_path / "out", workers=2,
                   **kw)
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, usable_cores() // 2))
    try:
        alone0 = evaluate(copy, TWO_SEEDS, seed=0, workers=1, **kw)
        alone1 = evaluate(black, TWO_SEEDS, seed=1, workers=1, **kw)
    finally:
        torch.set_num_threads(threads)
    assert "compute_train" not in alone0.timings and "compute_train" not in alone1.timings
    assert rec.metrics.action_per_seed == [alone0.metrics.action, alone1.metrics.action]
    assert rec.attackers[0].cmap_per_seed == [alone0.attackers[0].cmap,
                                              alone1.attackers[0].cmap]
    assert alone1.metrics.action <= 100 / 8 + 8  # black really served seed 1
    assert rec.metrics.ci_method == "videos+replicas, max inside"
    info = rec.submission
    assert info.sha256 == alone0.submission.sha256
    assert info.replicas == [Replica(seed=1, sha256=alone1.submission.sha256)]
    stored = read_record(tmp_path / "out" / f"{rec.entry_id}.json")
    assert stored.submission.replicas == info.replicas and stored.schema_version == SCHEMA_VERSION
    assert alone0.submission.replicas == [] and alone0.metrics.ci_method != rec.metrics.ci_method


def test_replica_count_must_match_the_seeds(tmp_path):
    f = tmp_path / "a.pt2"
    f.write_bytes(b"x")  # never read: the count is checked before loading anything
    with pytest.raises(PabenchError, match=r"3 replica\(s\) given, but protocol 'known' "
                                           r"scores 3 seed\(s\).*\(2\)") as info:
        EvaluationConfig(f, "known", replicas=(f, f, f)).resolved()
    assert "\n" not in str(info.value)
    with pytest.raises(PabenchError, match="1 seed"):
        EvaluationConfig(f, "known", seed=0, replicas=(f,)).resolved()
    with pytest.raises(PabenchError, match="learned baseline trains one replica"):
        EvaluationConfig("baseline:vita", "known", replicas=(f, f)).resolved()
    assert EvaluationConfig(f, "known", replicas=(f, f)).resolved().replicas == (f, f)


def test_a_learned_baseline_builds_one_training_seed_per_evaluation_seed(monkeypatch):
    built: list[int] = []

    def build(ctx: BuildContext) -> nn.Module:
        built.append(ctx.replica)
        return Identity() if ctx.replica == 0 else Black()

    monkeypatch.setitem(ANONYMIZERS._items, "seeded", AnonymizerSpec(
        "seeded", "test", build, "learned", training_seed=lambda k: 7 + k))
    sub = resolve_submission("baseline:seeded", BuildContext(preset="tiny"), seeds=3)
    assert built == [0, 1, 2]
    assert [r.training_seed for r in (sub, *sub.replicas)] == [7, 8, 9]
    assert [sub.for_seed(k) for k in range(3)] == [sub, *sub.replicas]
    assert sub.sha256 != sub.replicas[0].sha256
    # a training-free baseline is one anonymizer for every seed
    plain = resolve_submission("baseline:identity", BuildContext(preset="tiny"), seeds=3)
    assert plain.replicas == () and plain.for_seed(2) is plain


def test_replicas_are_part_of_what_a_record_replaces(tmp_path):
    """Same name and seed-0 anonymizer but other replicas is another submission: replacing
    its record needs --replace."""
    path = next(p for p in sorted(COMMITTED.glob("*.json"))
                if not json.loads(p.read_text())["submission"].get("replicas"))
    record = read_record(path)
    target = tmp_path / path.name
    write_record(record, target)
    pooled = record.model_copy(update={"submission": record.submission.model_copy(update={
        "replicas": [Replica(seed=1, sha256="0" * 64, training_seed=1)]})})
    with pytest.raises(PabenchError, match="pass --replace"):
        write_record(pooled, target)
    assert write_record(pooled, target, replace=True)
    assert read_record(target).submission.replicas[0].training_seed == 1


def test_cli_refuses_bad_replicas_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from pabench.cli import app
    from pabench.cli.usage import exit_status

    a, b = tmp_path / "a.pt2", tmp_path / "b.pt2"
    a.write_bytes(b"x")
    b.write_bytes(b"x")
    cases = {
        ("--replica", str(tmp_path / "gone.pt2")): "gone.pt2: file not found",
        (str(b), "--replica", str(b)): "one at a time",
        ("--replica", str(b)): "1 replica(s) given, but protocol 'known' scores 3 seed(s)",
        ("--replica", str(b), "--replica", str(b), "--seed", "0"): "scores 1 seed(s)",
    }
    for extra, needle in cases.items():  # `main` prints these as one `error:` line, exit 2
        res = CliRunner().invoke(app, ["evaluate", str(a), *extra, "--protocol", "known"])
        assert isinstance(res.exception, PabenchError), res.output
        assert exit_status(res.exception) == 2
        assert needle in str(res.exception) and "\n" not in str(res.exception)
