"""The learned baselines' real-data recipes carry their papers' settings (docs/baselines.md,
"Real-data recipes"): epochs of whichever dataset trains, SPAct's NT-Xent branch on SimCLR
views of privacy images, VITA's step sizes and iterations, MPPAR's eight attack models. Micro
scale: generated datasets in the builders' format, tiny models, a few steps."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from test_learned_real import _images, _videos

from pabench.errors import PabenchError
from pabench.models import MODELS, build_model
from pabench.protocols import protocols_for
from pabench.training.augment import SimCLRDraw, simclr, simclr_draw
from pabench.training.methods import (
    METHODS,
    MPPARRecipe,
    PenaltyRecipe,
    SPActRecipe,
    VitaRecipe,
    default_recipe,
    load_recipe,
    train_anonymizer,
)
from pabench.training.methods import spact as spact_module
from pabench.training.methods.run import _Run
from pabench.training.pools import real_source

ROOT = Path(__file__).resolve().parents[1]
_TINY = {"width": 4, "target": "tiny3d", "identity_batch": 4, "batch": 4, "ssl_hidden": 16,
         "ssl_dim": 8, "ssl_model": "tiny-vgg2d"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two action datasets, one twice the other's size (UCF101 against HMDB51 in small), and
    one of privacy images."""
    root = tmp_path_factory.mktemp("real")
    _videos(root / "small", 10)
    _videos(root / "large", 20)
    _images(root / "priv", 30)
    return root


def _source(corpus: Path, action: str = "small"):
    return real_source(corpus, action, "priv", frames=4, size=16)


def test_real_recipes_carry_the_papers_values() -> None:
    """Each value with its source: SPAct supplement C.1-C.4, the penalty paper Sec. 4.2 and
    Table 1, VITA Sec. 4.2.2, the MPPAR supplement."""
    spact = default_recipe("spact", real=True)
    assert isinstance(spact, SPActRecipe)
    assert (spact.identity_steps, spact.target_steps, spact.ssl_steps, spact.steps) == (
        100, 150, 400, 100)
    assert set(spact.in_epochs) == {"identity_steps", "target_steps", "ssl_steps", "steps"}
    assert spact.ssl_views == "simclr" and spact.ssl_model == "resnet50"
    assert (spact.ssl_hidden, spact.ssl_dim, spact.temperature) == (2048, 128, 0.1)
    assert spact.anonymizer_lr == spact.target_lr == spact.ssl_lr == spact.identity_lr == 1e-3
    penalty = default_recipe("penalty", real=True)
    assert isinstance(penalty, PenaltyRecipe) and penalty.ssl_views == "simclr"
    assert (penalty.batch, penalty.penalty_bound, penalty.omega) == (8, 0.3, 1.0)
    for method in ("vita", "vita-grl", "vita-kbeam"):
        vita = default_recipe(method, real=True)
        assert isinstance(vita, VitaRecipe)
        assert (vita.steps, vita.restart_every) == (800, 100)  # iterations, not epochs
        assert not {"steps", "restart_every"} & set(vita.in_epochs)
        assert (vita.anonymizer_lr, vita.target_lr, vita.budget_lr) == (1e-4, 1e-5, 1e-2)
        assert (vita.gamma, vita.budget_threshold) == (0.5, 0.99)
    mppar = default_recipe("mppar", real=True)
    assert isinstance(mppar, MPPARRecipe)
    assert len(mppar.budget_models) == len(set(mppar.budget_models)) == 8
    assert (mppar.anonymizer_lr, mppar.inner_lr, mppar.budget_threshold) == (1e-4, 5e-4, 0.95)
    assert mppar.steps == 100 and "steps" in mppar.in_epochs
    assert mppar.restart_every > mppar.steps and "restart_every" in mppar.in_epochs


def test_mppar_attack_models_are_mobilenet_v2_widths_outside_the_ranked_attackers() -> None:
    """MPPAR's f_train^P: eight widths of the MobileNet-V2 family, none a ranked real
    protocol's attacker; each builds and classifies a frame."""
    models = default_recipe("mppar", real=True).budget_models
    ranked = {a for p in protocols_for("real") if p.role != "reproduction" for a in p.attackers}
    assert not set(models) & ranked
    widths = set()
    for name in models:
        assert MODELS.get(name).kind == "frame"
        net = build_model(name, 5, 32).eval()
        assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 5)
        widths.add(sum(p.numel() for p in net.parameters()))
    assert len(widths) == 8  # eight different networks, not one under eight names


@pytest.mark.parametrize("method", METHODS)
def test_pa_synth_recipes_keep_their_dumps(method: str) -> None:
    """The new fields dump only when set: pa-synth's recipes (and so their digests, caches and
    the recipes committed records name) read as before."""
    dump = default_recipe(method).model_dump_json()
    assert "in_epochs" not in dump and "ssl_views" not in dump


def test_epochs_follow_the_dataset_that_trains(corpus: Path) -> None:
    """One recipe, two action datasets of 9 and 18 training clips (a tenth held out): the same
    epochs, so an epoch's steps more on the larger; the privacy side's epochs count privacy
    images; VITA's iterations stay iterations."""
    recipe = default_recipe("spact", real=True).model_copy(update={
        **_TINY, "identity_steps": 2, "target_steps": 3, "steps": 2, "ssl_steps": 1})
    steps = {}
    for action in ("small", "large"):
        run = _Run(recipe, _source(corpus, action), "cpu", None)
        action_clips, privacy_clips = len(run.batches.action_pool), len(run.batches.privacy_pool)
        epoch = math.ceil(action_clips / 4)
        assert run.recipe.steps == 2 * epoch and run.recipe.target_steps == 3 * epoch
        assert run.recipe.identity_steps == 2 * epoch  # identity_batch 4 here too
        assert run.recipe.ssl_steps == math.ceil(privacy_clips / 4)
        assert run.recipe.in_epochs == ()
        steps[action] = run.recipe.steps
    assert steps == {"small": 2 * math.ceil(9 / 4), "large": 2 * math.ceil(18 / 4)}
    vita = default_recipe("vita", real=True).model_copy(update={
        k: v for k, v in _TINY.items() if not k.startswith("ssl")})
    run = _Run(vita.model_copy(update={"budget_models": ("tiny-vgg2d",)}),
               _source(corpus, "large"), "cpu", None)
    assert (run.recipe.steps, run.recipe.restart_every) == (800, 100)  # VITA's iterations


def test_in_epochs_names_only_step_counts(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"in_epochs": ["ssl_steps"]}')
    with pytest.raises(PabenchError, match="in_epochs: 'ssl_steps' is not one of this "
                                           "recipe's step counts"):
        load_recipe(path, "vita")


def test_spact_nt_xent_branch_reads_simclr_views_of_privacy_images(corpus: Path,
                                                                  monkeypatch) -> None:
    """On real data every NT-Xent batch (f_B's pretraining, f_A's step, f_B's step) is two
    SimCLR views of frames of the privacy dataset's images, never of action clips."""
    source = _source(corpus)
    stills = source.pools(0, 0)[1].videos[:, 0].transpose(0, 3, 1, 2)  # [M, 3, H, W]
    privacy = {frame.tobytes() for frame in torch.from_numpy(stills.copy()).float().div_(255)
               .numpy()}
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def spy(frames: torch.Tensor, draw: SimCLRDraw) -> torch.Tensor:
        out = simclr(frames, draw)
        seen.append((frames, out))
        return out

    monkeypatch.setattr(spact_module, "simclr", spy)
    recipe = default_recipe("spact", real=True).model_copy(update={
        **_TINY, "identity_steps": 1, "target_steps": 1, "steps": 3, "ssl_steps": 2,
        "in_epochs": ()})
    train_anonymizer(recipe, source)
    assert len(seen) == 2 + 2 * 3  # f_B's pretraining, then f_A's and f_B's step each time
    for frames, out in seen:
        assert len(frames) == 2 * recipe.batch and out.shape == frames.shape
        assert {f.numpy().tobytes() for f in frames} <= privacy
        assert not torch.equal(out, frames)  # augmented


def test_simclr_views_are_the_drawn_transforms() -> None:
    """A draw that crops the whole frame and changes nothing returns the frame; a flip
    mirrors it; a random draw keeps the shape and the [0, 1] range and differs per view."""
    frames = torch.rand(3, 3, 16, 16)
    none = SimCLRDraw(np.tile([0.0, 0.0, 1.0, 1.0], (3, 1)), np.zeros(3, bool),
                      np.tile([1.0, 1.0, 1.0, 0.0], (3, 1)), np.zeros(3, bool),
                      np.full((3, 4), np.nan))
    assert torch.allclose(simclr(frames, none), frames, atol=1e-5)
    flipped = SimCLRDraw(none.box, np.ones(3, bool), none.jitter, none.gray, none.cutout)
    assert torch.allclose(simclr(frames, flipped), frames.flip(-1), atol=1e-5)
    gray = SimCLRDraw(none.box, none.flip, none.jitter, np.ones(3, bool), none.cutout)
    out = simclr(frames, gray)
    assert torch.allclose(out[:, 0], out[:, 1]) and torch.allclose(out[:, 1], out[:, 2])
    views = simclr(frames[:1].expand(8, -1, -1, -1), simclr_draw(np.random.default_rng(0), 8))
    assert views.shape == (8, 3, 16, 16) and views.min() >= 0 and views.max() <= 1
    assert len({v.numpy().tobytes() for v in views}) == 8
