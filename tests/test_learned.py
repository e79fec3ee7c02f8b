"""Learned baselines (SPAct, VITA): training, export, recipes, DDP. Micro recipes keep it fast."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from pabench.anonymizers import get_anonymizer, learned_baselines
from pabench.anonymizers.learned import TRAIN_DATASET, AnonymizerUNet
from pabench.anonymizers.learned_baselines import cache_path, load_or_train, training_data
from pabench.anonymizers.segmenter import TRAIN_DATASET as SEGMENTER_TRAIN
from pabench.cli import app
from pabench.data.synth import (
    KNOWN_ACTIONS,
    KNOWN_ATTRIBUTES,
    NOVEL_ACTIONS,
    NOVEL_ATTRIBUTES,
    SYNTH_DATASETS,
    clip_rng,
)
from pabench.errors import PabenchError
from pabench.submission import load_submission, validate
from pabench.training.anonymizer import (
    METHODS,
    Batches,
    SPActRecipe,
    TrainResult,
    default_recipe,
    load_recipe,
    pretrain_identity,
    render_pool,
)

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
_SMALL = {"clips": 16, "batch": 4, "width": 4, "identity_steps": 2, "target_steps": 2}
MICRO = {
    "spact": {**_SMALL, "steps": 2, "ssl_steps": 2, "ssl_hidden": 16, "ssl_dim": 8},
    "vita": {**_SMALL, "steps": 3, "budget_steps": 2, "budget_clips": 8, "restart_every": 1},
}


def _micro(tmp_path: Path, method: str) -> Path:
    path = tmp_path / f"micro-{method}.json"
    path.write_text(json.dumps(MICRO[method]))
    return path


@pytest.mark.parametrize("method", METHODS)
def test_micro_recipe_trains_exports_both_formats_and_validates(tmp_path, method):
    recipe = _micro(tmp_path, method)
    x = torch.rand(2, 3, 8, 32, 32, generator=torch.Generator().manual_seed(1))
    for i, fmt in enumerate(("torch.export", "torchscript")):
        out = tmp_path / fmt / f"{method}.pt2"
        res = runner.invoke(app, ["baselines", "train", method, "--recipe", str(recipe),
                                  "--out", str(out), "--format", fmt], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        assert ("reused" in res.output) == (i > 0)  # the second export reuses the cache
        assert "minimax:" in res.output and "identity:" in res.output
        sub = load_submission(out)
        assert sub.format == fmt
        digest = learned_baselines.recipe_digest(load_recipe(recipe, method))
        assert sub.name == sub.meta.name == f"{method}-{digest}"  # never the baseline's name
        assert sub.meta.training_data == training_data(method)
        report = validate(sub, frames=8, size=32)
        assert report.checks[-1] == "memory_budget"
        trained = load_or_train(method, "tiny", recipe=load_recipe(recipe, method)).net
        with torch.no_grad():
            torch.testing.assert_close(sub.module(x), trained(x), rtol=1e-4, atol=1e-5)


def test_corrupt_cache_is_trained_over(tmp_path, monkeypatch):
    recipe = SPActRecipe(width=4)
    path = cache_path("spact", "tiny", recipe, tmp_path)
    path.write_bytes(b"PK\x03\x04 cut short")
    torch.manual_seed(0)
    fresh = TrainResult(AnonymizerUNet(4).eval(), {"identity": {"steps": 1.0}})
    monkeypatch.setattr(learned_baselines, "train_anonymizer", lambda *a, **k: fresh)
    first = load_or_train("spact", "tiny", recipe=recipe, cache_dir=tmp_path)
    assert first is fresh and not first.cached
    monkeypatch.setattr(learned_baselines, "train_anonymizer",
                        lambda *a, **k: pytest.fail("retrained"))
    again = load_or_train("spact", "tiny", recipe=recipe, cache_dir=tmp_path)
    assert again.cached and again.losses == fresh.losses
    x = torch.rand(1, 3, 2, 16, 16)
    with torch.no_grad():
        assert torch.equal(again.net(x), fresh.net(x))


def test_identity_pretraining_reproduces_the_input():
    recipe = SPActRecipe()
    torch.manual_seed(0)
    fa = AnonymizerUNet(recipe.width)
    held_out = render_pool("tiny", 8, seed=1).videos.float().div(255)
    with torch.no_grad():
        before = float((fa(held_out) - held_out).abs().mean())
    stage = pretrain_identity(fa, Batches(render_pool("tiny", 64), recipe.batch, 0, "cpu"),
                              recipe)
    with torch.no_grad():
        after = float((fa(held_out) - held_out).abs().mean())
    print(f"held-out L1 {before:.3f} -> {after:.3f} in {stage.done} steps")
    assert after < 0.06 and after < before / 3


def test_bad_recipes_are_one_line_errors_naming_the_file(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"steps": 3,')
    with pytest.raises(PabenchError, match=r"recipe .*broken\.json: invalid JSON") as e:
        load_recipe(broken, "spact")
    assert "\n" not in str(e.value)
    typo = tmp_path / "typo.json"
    typo.write_text('{"stepz": 3}')
    with pytest.raises(PabenchError, match=r"typo\.json: invalid: stepz: Extra inputs are not"):
        load_recipe(typo, "vita")
    other = tmp_path / "other.json"
    other.write_text('{"gamma": 2.0}')  # a VITA key in a SPAct recipe
    with pytest.raises(PabenchError, match=r"other\.json: invalid: gamma: Extra inputs"):
        load_recipe(other, "spact")
    model = tmp_path / "model.json"
    model.write_text('{"budget_models": ["tiny3d"]}')
    with pytest.raises(PabenchError, match=r"model\.json: budget_models: .*video model"):
        load_recipe(model, "vita")
    out = subprocess.run([sys.executable, "-m", "pabench.cli", "baselines", "train", "spact",
                          "--recipe", str(typo), "--out", str(tmp_path / "x.pt2")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "typo.json: invalid: stepz" in out.stderr
    assert out.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("method", METHODS)
def test_checked_in_recipes_are_the_code_defaults(method):
    assert load_recipe(ROOT / "baselines" / f"{method}.json", method) == default_recipe(method)


def test_training_clips_come_from_a_namespace_of_their_own():
    """No benchmark split (nor the segmenter's data) shares a clip generator with them."""
    ours = clip_rng(0, TRAIN_DATASET, "train", 0).random(4)
    for name in (*SYNTH_DATASETS, SEGMENTER_TRAIN):
        for split in ("train", "test"):
            assert not np.array_equal(clip_rng(0, name, split, 0).random(4), ours)


def test_declared_training_data_is_known_only():
    for method in METHODS:
        declared = get_anonymizer(method).training_data
        assert declared is not None and declared.action_classes == list(KNOWN_ACTIONS)
        assert not set(declared.action_classes) & set(NOVEL_ACTIONS)
        assert not set(declared.attributes) & set(NOVEL_ATTRIBUTES)
    assert get_anonymizer("spact").training_data.attributes == []  # self-supervised
    assert get_anonymizer("vita").training_data.attributes == list(KNOWN_ATTRIBUTES)


def test_torchrun_two_ranks_train_identical_anonymizers(tmp_path):
    worker = Path(__file__).with_name("learned_ddp_worker.py")
    logs = tmp_path / "logs"
    pairs = [str(a) for m in METHODS for a in (m, _micro(tmp_path, m))]
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         f"--log-dir={logs}", "--redirects=3", str(worker), str(tmp_path), *pairs],
        capture_output=True, text=True, timeout=300,
    )
    # torchrun's own traceback hides the cause; each rank's stderr holds it
    rank_logs = "\n".join(f"{p}:\n{p.read_text()[-1500:]}"
                          for p in sorted(logs.rglob("stderr.log")))
    assert out.returncode == 0, rank_logs or out.stderr[-2000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["world"] == 2
    for method in METHODS:
        assert ranks[0][method] == ranks[1][method]  # same steps, same weights on both ranks
        assert ranks[0][method]["steps"]["minimax"] == MICRO[method]["steps"]
