"""Learned baselines (SPAct, penalty, VITA and its solvers): training, export, recipes, DDP,
checkpoints and resume. Micro recipes keep it fast."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from quick import one_line_error, pabench_main, torchrun
from typer.testing import CliRunner

from pabench.anonymizers import BuildContext, get_anonymizer
from pabench.anonymizers.learned import TRAIN_DATASET, AnonymizerUNet
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
from pabench.evaluation.run import resolve_submission
from pabench.io import digest
from pabench.protocols import PROTOCOLS
from pabench.runtime import numerics
from pabench.submission import load_submission, validate
from pabench.training import baselines as learned_baselines
from pabench.training.baselines import cache_path, load_or_train, training_data
from pabench.training.methods import (
    METHODS,
    RECIPES,
    SPActRecipe,
    TrainResult,
    default_recipe,
    load_recipe,
    pretrain_identity,
    train_anonymizer,
)
from pabench.training.methods.base import _evaluating
from pabench.training.methods.run import _Run
from pabench.training.methods.spact import _SSL
from pabench.training.pools import Batches, as_tensor, render_pool, synth_source

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
_SMALL = {"clips": 16, "batch": 4, "width": 4, "identity_steps": 2, "target_steps": 2}
_MICRO_SSL = {**_SMALL, "steps": 2, "ssl_steps": 2, "ssl_hidden": 16, "ssl_dim": 8}
_MICRO_VITA = {**_SMALL, "steps": 3, "budget_steps": 2, "budget_clips": 8, "restart_every": 1}
MICRO = {"spact": _MICRO_SSL, "penalty": _MICRO_SSL, "vita": _MICRO_VITA,
         "vita-grl": _MICRO_VITA, "mppar": _MICRO_VITA,
         "vita-kbeam": {**_MICRO_VITA, "budget_models": ["tiny-vgg2d", "tiny-vgg2d"]}}
EXPORTED = ("spact", "vita")  # the others share the export path: their loops are tested below


def _micro(tmp_path: Path, method: str) -> Path:
    path = tmp_path / f"micro-{method}.json"
    path.write_text(json.dumps(MICRO[method]))
    return path


@pytest.mark.parametrize("method", EXPORTED)
def test_micro_recipe_trains_exports_both_formats_and_validates(tmp_path, method):
    recipe = _micro(tmp_path, method)
    x = torch.rand(2, 3, 8, 32, 32, generator=torch.Generator().manual_seed(1))
    for i, fmt in enumerate(("torch.export", "torchscript")):
        out = tmp_path / fmt / f"{method}.pt2"
        res = runner.invoke(app, ["train-baseline", method, "--recipe", str(recipe),
                                  "--out", str(out), "--format", fmt, "--eval-every", "1"],
                            env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        assert ("reused" in res.output) == (i > 0)  # the second export reuses the cache
        assert "minimax:" in res.output and "identity:" in res.output
        sub = load_submission(out)
        assert sub.format == fmt
        digest = learned_baselines.recipe_digest(load_recipe(recipe, method))
        assert sub.name == sub.meta.name == f"{method}-{digest}"  # never the baseline's name
        assert sub.meta.training_data == training_data(method, load_recipe(recipe, method))
        assert sub.meta.training_recipe == {**load_recipe(recipe, method).model_dump(
            mode="json")} and sub.meta.training_recipe["seed"] == 0  # seeds recorded
        rows = out.with_suffix(".curves.csv").read_text().splitlines()
        assert rows[0].startswith("step,") and "val_top1" in rows[0]
        assert [r.split(",")[0] for r in rows[1:]] == [str(i) for i in
                                                      range(MICRO[method]["steps"] + 1)]
        assert out.with_suffix(".curves.png").read_bytes()[:4] == b"\x89PNG"
        report = validate(sub, frames=8, size=32)
        assert report.checks[-1] == "memory_budget"
        trained = load_or_train(method, "tiny", recipe=load_recipe(recipe, method)).net
        with torch.no_grad():
            torch.testing.assert_close(sub.module(x), trained(x), rtol=1e-4, atol=1e-5)


def test_train_baseline_seed_trains_another_replica(tmp_path, monkeypatch):
    """`--seed` replaces the recipe's seed: another cache entry and file, the seed recorded."""
    trained = []

    def fake(spec, *a, **k):
        trained.append(spec.seed)
        return TrainResult(AnonymizerUNet(spec.width).eval(), {"identity": {"steps": 1.0}})

    monkeypatch.setattr(learned_baselines, "train_anonymizer", fake)
    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "home"))  # no cache of other tests
    recipe = _micro(tmp_path, "spact")
    names = []
    for seed in (None, 3):
        out = tmp_path / f"s{seed}.pt2"
        res = runner.invoke(app, ["train-baseline", "spact", "--recipe", str(recipe), "--out",
                                  str(out), *(["--seed", str(seed)] if seed else [])])
        assert res.exit_code == 0, res.output
        meta = json.loads(out.with_suffix(".json").read_text())
        assert meta["training_recipe"]["seed"] == (seed or 0)
        names.append(meta["name"])
    assert trained == [0, 3] and names[0] != names[1]
    res = runner.invoke(app, ["train-baseline", "spact", "--seed", "-1"])
    assert res.exit_code == 2


def test_a_model_trained_by_evaluate_exports_its_curves(tmp_path, monkeypatch):
    """`pabench evaluate baseline:NAME` trains f_A with no export to write: its curves go into
    the cache, so a later `train-baseline` export of the same recipe has them. A cache made
    before that writes no empty log and says so."""
    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "home"))
    recipe = _micro(tmp_path, "spact")
    spec = load_recipe(recipe, "spact")
    load_or_train("spact", "tiny", recipe=spec, eval_every=1)  # as an evaluation trains it
    cache = cache_path("spact", "tiny", spec)
    assert _curve_steps(cache.with_suffix(".curves.csv")) == ["0", "1", "2"]
    out = tmp_path / "late.pt2"
    res = runner.invoke(app, ["train-baseline", "spact", "--recipe", str(recipe), "--out",
                              str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "reused" in res.output, res.output
    assert _curve_steps(out.with_suffix(".curves.csv")) == ["0", "1", "2"]
    payload = torch.load(cache, weights_only=True)
    torch.save({**payload, "curves": []}, cache)  # as older pabench cached it
    old = tmp_path / "old.pt2"
    res = runner.invoke(app, ["train-baseline", "spact", "--recipe", str(recipe), "--out",
                              str(old)], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "no curves:" in res.output, res.output
    assert old.is_file() and not old.with_suffix(".curves.csv").exists()


def _curve_steps(path: Path) -> list[str]:
    """The `step` column of a curves CSV."""
    return [r.split(",")[0] for r in path.read_text().splitlines()[1:]]


def test_corrupt_cache_is_trained_over(tmp_path, monkeypatch):
    recipe = SPActRecipe(width=4)
    path = cache_path("spact", "tiny", recipe, tmp_path)
    path.write_bytes(b"PK\x03\x04 cut short")
    torch.manual_seed(0)
    fresh = TrainResult(AnonymizerUNet(4).eval(), {"identity": {"steps": 1.0}})
    monkeypatch.setattr(learned_baselines, "train_anonymizer", lambda *a, **k: fresh)
    first = load_or_train("spact", "tiny", recipe=recipe, cache_dir=tmp_path)
    assert first.net is fresh.net and not first.cached
    monkeypatch.setattr(learned_baselines, "train_anonymizer",
                        lambda *a, **k: pytest.fail("retrained"))
    again = load_or_train("spact", "tiny", recipe=recipe, cache_dir=tmp_path)
    assert again.cached and again.losses == fresh.losses
    x = torch.rand(1, 3, 2, 16, 16)
    with torch.no_grad():
        assert torch.equal(again.net(x), fresh.net(x))


def test_a_cached_f_a_is_keyed_by_where_it_trained_and_its_records_say_where(tmp_path,
                                                                             monkeypatch):
    """The same recipe and seed train other weights on another thread count, so the cache
    is keyed by it, and the payload, the evaluation's submission meta (every training seed's)
    and the export's sidecar say where the weights were trained."""
    trainings: list[int] = []

    def fake(*args, **kwargs) -> TrainResult:
        trainings.append(torch.get_num_threads())
        return TrainResult(AnonymizerUNet(4).eval(), {"identity": {"steps": 1.0}})

    monkeypatch.setattr(learned_baselines, "train_anonymizer", fake)
    recipe = SPActRecipe(width=4)
    threads = torch.get_num_threads()
    first = load_or_train("spact", "tiny", recipe=recipe, cache_dir=tmp_path)
    assert first.trained_on is not None and first.trained_on["threads"] == str(threads)
    assert first.trained_on["device"] == "cpu" and first.trained_on["cpu"]
    again = load_or_train("spact", "tiny", recipe=recipe, cache_dir=tmp_path)
    assert again.cached and again.trained_on == first.trained_on and len(trainings) == 1
    torch.set_num_threads(threads + 1)
    try:
        other = load_or_train("spact", "tiny", recipe=recipe, cache_dir=tmp_path)
    finally:
        torch.set_num_threads(threads)
    assert not other.cached and trainings == [threads, threads + 1]
    assert cache_path("spact", "tiny", recipe, tmp_path).is_file()
    assert len(list(tmp_path.glob("spact-tiny-*.pt"))) == 2
    sub = resolve_submission("baseline:spact", BuildContext(preset="tiny", cache_dir=tmp_path),
                             seeds=2)
    assert [s.meta.trained_on["threads"] for s in (sub, *sub.replicas)] == [str(threads)] * 2
    assert [s.meta.training_recipe for s in (sub, *sub.replicas)] == [
        default_recipe("spact").model_copy(update={"seed": k}).model_dump(mode="json")
        for k in (0, 1)]
    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "home"))
    out = tmp_path / "spact.pt2"
    res = runner.invoke(app, ["train-baseline", "spact", "--recipe", str(_micro(tmp_path, "spact")),
                              "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["trained_on"]["threads"] == str(threads)


def test_bf16_autocast_trains_f_a_and_keys_its_cache(tmp_path):
    """A GPU's default, bf16 autocast, run on the CPU (one method: bf16 is slow on these
    cores, MPPAR's micro run took 442 s beside a training): every phase trains finite
    float32 weights other than a float32 training's; the cache key and `trained_on` name the
    dtype, and a float32 training keeps the key it had before autocast (the thread-count key
    alone), so its caches are still found."""
    method = "spact"
    recipe = RECIPES[method](**MICRO[method])
    bf16 = load_or_train(method, "tiny", recipe=recipe, cache_dir=tmp_path, amp="bf16")
    fp32 = load_or_train(method, "tiny", recipe=recipe, cache_dir=tmp_path, amp="off")
    assert bf16.trained_on is not None and bf16.trained_on["autocast"] == "bfloat16"
    assert fp32.trained_on is not None and "autocast" not in fp32.trained_on
    weights = [r.net.state_dict() for r in (bf16, fp32)]
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all()
               for sd in weights for v in sd.values() if v.is_floating_point())
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    plain = cache_path(method, "tiny", recipe, tmp_path)
    assert plain == cache_path(method, "tiny", recipe, tmp_path, amp="off") != cache_path(
        method, "tiny", recipe, tmp_path, amp="bf16")
    assert plain.stem.endswith(digest(*numerics("cpu"))[:8])
    assert len(list(tmp_path.glob(f"{method}-tiny-*.pt"))) == 2


def test_identity_pretraining_reproduces_the_input():
    recipe = SPActRecipe()
    torch.manual_seed(0)
    fa = AnonymizerUNet(recipe.width)
    pool = render_pool("tiny", 8, seed=1)
    held_out = as_tensor(pool, np.arange(len(pool)), pool.videos.shape[1], "cpu")
    with torch.no_grad():
        before = float((fa(held_out) - held_out).abs().mean())
    stage = pretrain_identity(fa, Batches(render_pool("tiny", 64), None, recipe.batch, 0, "cpu", 8),
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
    out = pabench_main("train-baseline", "spact", "--recipe", str(typo), "--out",
                       str(tmp_path / "x.pt2"))
    one_line_error(out, 1, "typo.json: invalid: stepz")


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
    for method in ("spact", "penalty"):  # self-supervised
        assert get_anonymizer(method).training_data.attributes == []
    for method in ("vita", "vita-grl", "vita-kbeam"):
        assert get_anonymizer(method).training_data.attributes == list(KNOWN_ATTRIBUTES)


@pytest.mark.parametrize("method", METHODS)
def test_training_attackers_are_disjoint_from_every_ranked_protocols(method):
    """VITA's protocol: the architectures that score an anonymizer are not those it trained
    against. Checked on the checked-in recipe, over every ranked protocol of every benchmark."""
    trained = set(load_recipe(ROOT / "baselines" / f"{method}.json", method).attackers())
    assert trained and trained == set(get_anonymizer(method).training_data.attackers)
    for pid, spec in PROTOCOLS.items():
        if spec.role == "ranked":
            assert not trained & set(spec.attackers), (pid, trained & set(spec.attackers))


def _utility(ft: torch.nn.Module, a: torch.Tensor, y: torch.Tensor) -> float:
    """f_T's top-1 (%) with batch statistics and no dropout (running statistics are still
    immature after a few steps), on a copy so the run is untouched."""
    ft = copy.deepcopy(ft).train()
    for module in ft.modules():
        if isinstance(module, torch.nn.Dropout):
            module.eval()
    with torch.no_grad():
        return 100 * float((ft(a).argmax(1) == y).float().mean())


@pytest.mark.parametrize("method", METHODS)
def test_short_training_lowers_the_privacy_term_and_keeps_the_action(method):
    """Against the privacy side as pretrained (frozen, so only f_A's direction is measured),
    eight minimax iterations lower f_A's privacy term on the training clips, while f_T, which
    knew at least half of the clips before, still recognises at least 3x chance of them in f_A's
    output."""
    ssl = dict(ssl_steps=10, ssl_hidden=16, ssl_dim=8)
    vita = dict(budget_steps=10, budget_clips=16, restart_every=100,
                budget_models=["tiny-vgg2d"] * (2 if method in ("vita-kbeam", "mppar") else 1))
    extra = {"spact": ssl, "penalty": {**ssl, "penalty_bound": 0.05}}.get(method, vita)
    # 32 clips, not 16: on 16 a swing of 4 clips is 25 points of top-1, which one thread on an
    # AVX2 CPU gave spact where two threads or AVX-512 did not. 60 f_T steps, not 30: after 30,
    # f_T knew 34% of the clips on a Zen 4 CPU (3x chance is 37.5%), 69-94% after 60
    recipe = RECIPES[method](clips=32, batch=4, width=4, identity_steps=10, target_steps=60,
                             steps=8, anonymizer_lr=1e-2, target_lr=5e-3, **extra)
    run = _Run(recipe, synth_source("tiny"), "cpu", None)
    run.pretrain()
    privacy = run.privacy.models()
    side = run.privacy
    for opt in [side.opt_b] if isinstance(side, _SSL) else side.opts:  # type: ignore[attr-defined]
        for group in opt.param_groups:
            group["lr"] = 0.0  # frozen as pretrained
    pool = run.batches.action_pool
    x = as_tensor(pool, np.arange(len(pool)), pool.videos.shape[1], "cpu")
    yb = torch.from_numpy(pool.attributes)

    def measure() -> tuple[float, float]:
        with _evaluating(run.nets.fa, batch_stats=tuple(privacy)):
            a = run.nets.fa(x)
            term = float(run.privacy.term(a, yb))
        return term, _utility(run.nets.ft, a, torch.from_numpy(pool.actions))

    (term0, top0), _ = measure(), run.iterate()
    term1, top1 = measure()
    print(f"{method}: privacy term {term0:.3f} -> {term1:.3f}, f_T top-1 {top0:.1f} -> {top1:.1f}")
    assert term1 < term0
    assert top0 >= 50 and top1 >= 3 * 100 / len(KNOWN_ACTIONS)


def test_mppar_first_order_option_changes_the_meta_step_only():
    """The first-order meta step drops the second-order term: same data, same splits, other
    weights; both finite."""
    nets = {}
    for first_order in (False, True):
        recipe = RECIPES["mppar"](**{**MICRO["mppar"], "steps": 2, "anonymizer_lr": 1e-2},
                                  first_order=first_order)
        result = train_anonymizer(recipe, "tiny")
        assert result.losses["minimax"]["steps"] == 2
        nets[first_order] = result.net.state_dict()
    assert all(torch.isfinite(v).all() for sd in nets.values() for v in sd.values())
    assert any(not torch.equal(nets[False][k], nets[True][k]) for k in nets[False])


def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    """SIGKILL after the first minimax checkpoint, `--resume`, and compare with a run that was
    never interrupted (curves do not move weights, so that one runs in-process without them)."""
    spec = {**MICRO["spact"], "steps": 40}
    recipe = tmp_path / "resume.json"
    recipe.write_text(json.dumps(spec))
    home = tmp_path / "home"
    env = {**os.environ, "PABENCH_HOME": str(home), "OMP_NUM_THREADS": "1"}
    loaded = load_recipe(recipe, "spact")
    # the CLI runs on one thread, and the thread count is in the cache's name
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cache = cache_path("spact", "tiny", loaded, home / "models")
    finally:
        torch.set_num_threads(threads)
    ckpt = cache.with_suffix(".ckpt")
    out = tmp_path / "spact.pt2"
    cmd = [sys.executable, "-m", "pabench.cli", "train-baseline", "spact", "--preset", "tiny",
           "--recipe", str(recipe), "--out", str(out), "--eval-every", "10"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_at = None
    deadline = time.monotonic() + 120
    while killed_at is None and time.monotonic() < deadline and proc.poll() is None:
        if ckpt.is_file():
            state = torch.load(ckpt, weights_only=True)
            if state["minimax"]["done"] > 0:
                proc.send_signal(signal.SIGKILL)
                killed_at = state["minimax"]["done"]
        time.sleep(0.02)
    proc.wait(timeout=30)
    assert killed_at is not None and killed_at < spec["steps"], "the run was not killed mid-way"
    assert not out.exists()
    done = subprocess.run([*cmd, "--resume"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = torch.load(cache, weights_only=True)
    assert not ckpt.exists()  # removed once the cache is written
    torch.set_num_threads(1)  # as the CLI runs above: the thread count moves float reductions
    try:
        fresh = load_or_train("spact", "tiny", recipe=loaded, cache_dir=tmp_path / "fresh").net
    finally:
        torch.set_num_threads(threads)
    for key, value in fresh.state_dict().items():
        assert torch.equal(resumed["weights"][key], value), key
    steps = [r.split(",")[0] for r in out.with_suffix(".curves.csv").read_text().splitlines()]
    assert steps[1:] == [str(i) for i in range(0, spec["steps"] + 1, 10)]  # each row once
    print(f"killed after minimax step {killed_at} of {spec['steps']}; resumed to equal weights")


def test_torchrun_two_ranks_train_identical_anonymizers(tmp_path):
    worker = Path(__file__).with_name("learned_ddp_worker.py")
    pairs = [str(a) for m in EXPORTED for a in (m, _micro(tmp_path, m))]
    torchrun(worker, tmp_path / "logs", str(tmp_path), "tiny", *pairs)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["world"] == 2
    for method in EXPORTED:
        assert ranks[0][method] == ranks[1][method]  # same steps, same weights on both ranks
        assert ranks[0][method]["steps"]["minimax"] == MICRO[method]["steps"]


def test_kbeam_ascent_steps_ascend_against_the_beam_picked_first(monkeypatch):
    """Algorithm 2's d_iter: each iteration f_A takes `ascent_steps` adversarial updates,
    all against the beam of lowest loss on the first batch, then the joint update."""
    recipe = RECIPES["vita-kbeam"](**{**MICRO["vita-kbeam"], "steps": 2, "ascent_steps": 3,
                                     "budget_models": ["tiny-vgg2d", "tiny-dws2d"],
                                     "restart_every": 100, "budget_threshold": None})
    run = _Run(recipe, synth_source("tiny"), "cpu", None)
    run.pretrain()
    side = run.privacy
    used: list[int] = []
    picked: list[int] = []
    logits, term = side._logits, side._privacy_term  # type: ignore[attr-defined]

    def spy_logits(model, *args):
        used.append(next(i for i, m in enumerate(side.attackers) if m is model))  # type: ignore[attr-defined]
        return logits(model, *args)

    def spy_term(*args):
        out = term(*args)
        picked.append(out[2])
        return out

    monkeypatch.setattr(side, "_logits", spy_logits)
    monkeypatch.setattr(side, "_privacy_term", spy_term)
    run.iterate()
    # per iteration: both beams score the batch, two more steps on the picked one, then
    # every beam's supervised step
    assert used == [u for j in picked for u in (0, 1, j, j, 0, 1)]
    steps = {int(s["step"]) for s in run.nets.opt_a.state.values()}
    assert steps == {2 * (3 + 1)}  # three adversarial and one joint update per iteration


@pytest.mark.parametrize(("threshold", "expected"), [(None, 1), (1.0, 4), (1e-9, 1)])
def test_attackers_train_to_the_accuracy_threshold_each_iteration(threshold, expected):
    """VITA's "while Acc <= th_B": no threshold is one supervised step per iteration; th_B = 1
    can never be passed, so every attacker takes the capped number of steps; a threshold any
    batch passes stops after the first. The privacy stage's own steps are counted apart."""
    recipe = RECIPES["vita-kbeam"](**{**MICRO["vita-kbeam"], "steps": 2, "restart_every": 100,
                                     "budget_threshold": threshold, "budget_max_steps": 4})
    run = _Run(recipe, synth_source("tiny"), "cpu", None)
    run.pretrain()
    side = run.privacy
    before = [{int(s["step"]) for s in o.state.values()} for o in side.opts]  # type: ignore[attr-defined]
    run.iterate()
    after = [{int(s["step"]) for s in o.state.values()} for o in side.opts]  # type: ignore[attr-defined]
    for b, a in zip(before, after, strict=True):
        assert {x + 2 * expected for x in b} == a


def test_learned_baselines_train_on_the_clips_of_the_protocols_generator():
    """A learned baseline trains on an articulated generator's clips, cached under its own
    key; the flat generator's key and clips stay as they were, and the held-out measure trains
    its attackers as that generator's newest known protocol (none for a generator no protocol
    reads: a one-line error)."""
    from pabench.protocols import NEXT
    from pabench.training.held_out import known_for
    from pabench.training.pools import render_pool, synth_source

    flat, v3 = synth_source("tiny"), synth_source("tiny", 3)
    assert flat.key == "tiny" and flat.action_classes == tuple(KNOWN_ACTIONS)
    assert v3.key == "tiny-g3" and len(v3.action_classes) == 24
    pool = render_pool("tiny", 26, generator=3)
    assert pool.actions.tolist() == [*range(24), 0, 1]
    assert not np.array_equal(pool.videos[:8], render_pool("tiny", 8).videos)
    assert (known_for(2).version, known_for(NEXT["known"].data_version).version) == (6, 8)
    with pytest.raises(PabenchError, match="generator 5: no protocol reads its clips"):
        known_for(5)
