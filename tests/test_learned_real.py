"""Learned baselines trained on real data: two built datasets (action videos and privacy
images, the papers' UCF101 + VISPR1 setting) in the on-disk format the real builders write,
through `pabench train-baseline --benchmark real` as users run it, with micro recipes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from quick import one_line_error, pabench_main, torchrun
from typer.testing import CliRunner

from pabench.cli import app
from pabench.data.hub import DatasetMeta, encode_mp4, write_meta, write_split
from pabench.errors import PabenchError
from pabench.protocols import protocols_for
from pabench.submission import load_submission
from pabench.training.methods import METHODS, VitaRecipe, default_recipe, load_recipe
from pabench.training.pools import Batches, real_source

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
ACTIONS = ["clap", "wave", "run"]
ATTRIBUTES = ["face", "gender", "nudity", "skin_color"]
_MICRO = {"batch": 4, "width": 4, "identity_steps": 2, "identity_batch": 4, "target_steps": 2,
          "target": "tiny3d", "steps": 3, "budget_steps": 2, "budget_clips": 8,
          "restart_every": 2, "budget_models": ["tiny-vgg2d", "tiny-dws2d"], "in_epochs": []}
_MICRO_SSL = {**{k: v for k, v in _MICRO.items() if not k.startswith(("budget", "restart"))},
              "ssl_model": "tiny-vgg2d", "ssl_steps": 2, "ssl_hidden": 16, "ssl_dim": 8}


def _videos(root: Path, n: int) -> None:
    """`n` 24-frame 20x20 mp4s in split `train`, the action in the video's brightness."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        path = root / "videos" / "train" / f"v{i}.mp4"
        path.parent.mkdir(parents=True, exist_ok=True)
        frames = rng.integers(0, 60, (24, 20, 20, 3), dtype=np.uint8) + 60 * (i % 3)
        path.write_bytes(encode_mp4(frames.astype(np.uint8)))
        rows.append({"video_id": f"v{i}", "video": f"videos/train/{path.name}",
                     "action": i % 3})
    features = datasets.Features({"video_id": datasets.Value("string"),
                                  "video": datasets.Value("string"),
                                  "action": datasets.ClassLabel(names=ACTIONS)})
    write_split(root, "train", pd.DataFrame(rows), features)
    write_meta(root, DatasetMeta(name=root.name, action_classes=ACTIONS, splits={"train": n}))


def _images(root: Path, n: int) -> None:
    """`n` 20x20 pngs with yes/no attributes (VISPR's form: still images, no actions)."""
    rng = np.random.default_rng(1)
    rows = []
    for i in range(n):
        path = root / "videos" / "train" / f"im{i}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)).save(path)
        rows.append({"video_id": f"im{i}", "video": f"videos/train/{path.name}",
                     **{a: int(rng.random() < 0.5) for a in ATTRIBUTES}})
    features = datasets.Features({"video_id": datasets.Value("string"),
                                  "video": datasets.Value("string"),
                                  **{a: datasets.Value("int64") for a in ATTRIBUTES}})
    write_split(root, "train", pd.DataFrame(rows), features)
    write_meta(root, DatasetMeta(name=root.name, attributes=ATTRIBUTES, splits={"train": n}))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("real")
    _videos(root / "act", 20)
    _images(root / "priv", 60)
    return root


def test_two_pools_feed_their_own_batches_and_hold_out_a_tenth(corpus: Path) -> None:
    source = real_source(corpus, "act", "priv", frames=4, size=16)
    assert source.datasets == ("act", "priv") and source.attribute_names == tuple(ATTRIBUTES)
    action, privacy = source.pools(clips=0, seed=0)
    held_action, held_privacy = source.held_out(clips=64, seed=0)
    assert privacy is not None and held_privacy is not None
    assert (len(action), len(held_action), len(privacy), len(held_privacy)) == (18, 2, 54, 6)
    assert not set(action.rows) & set(held_action.rows)
    assert not set(privacy.rows) & set(held_privacy.rows)
    batches = Batches(action, privacy, 4, 0, "cpu", 4)
    x, y, xp, yb = batches.both()
    assert x.shape == xp.shape == (4, 3, 4, 16, 16) and xp is not x
    assert set(y.tolist()) <= {0, 1, 2} and yb.shape == (4, len(ATTRIBUTES))
    # a still image is one frame repeated: the privacy clips do not move
    assert (xp == xp[:, :, :1]).all() and not (x == x[:, :, :1]).all()
    # the video was stored at 4 x 4 frames; a batch takes a random 4-frame window of it
    assert action.videos.shape[1] == 16
    # MPPAR's support/query sets pick privacy clips by position; actions come along at random
    among = np.array([3, 7])
    _, _, xp, yb = batches.both(among=among)
    labels = {tuple(privacy.attributes[i]) for i in among}
    assert {tuple(row) for row in yb.tolist()} <= labels


@pytest.mark.parametrize("method", ["vita", "spact"])
def test_train_baseline_on_real_data_exports_a_declared_submission(corpus: Path, tmp_path,
                                                                   method: str) -> None:
    recipe = tmp_path / "micro.json"
    recipe.write_text(json.dumps(_MICRO_SSL if method == "spact" else _MICRO))
    out = tmp_path / f"{method}.pt2"
    result = runner.invoke(app, ["train-baseline", method, "--benchmark", "real",
                                 "--data-dir", str(corpus), "--action-data", "act",
                                 "--privacy-data", "priv", "--recipe", str(recipe),
                                 "--out", str(out), "--eval-every", "1"])
    assert result.exit_code == 0, result.output
    sub = load_submission(out)
    declared = sub.meta.training_data
    assert declared.datasets == ["act", "priv"] and declared.action_classes == ACTIONS
    assert declared.attributes == ([] if method == "spact" else ATTRIBUTES)
    rows = pd.read_csv(out.with_suffix(".curves.csv"))
    assert rows["val_top1"].notna().all() and len(rows) >= 2
    if method != "spact":
        assert rows["val_cmap"].between(0, 100).all()


def test_real_training_data_problems_are_one_line_errors(corpus: Path, tmp_path) -> None:
    with pytest.raises(PabenchError, match="'ucf101' is not built; run `pabench datasets"):
        real_source(corpus, "ucf101", "priv", 16, 112)
    with pytest.raises(PabenchError, match="priv: has no action classes"):
        real_source(corpus, "priv", "priv", 16, 112)
    with pytest.raises(PabenchError, match="act: has no privacy attributes"):
        real_source(corpus, "act", "act", 16, 112)
    result = pabench_main("train-baseline", "spact", "--data-dir", str(corpus))
    assert one_line_error(result, 2).endswith("--data-dir names real datasets: add --benchmark "
                                              "real")


@pytest.mark.parametrize("method", METHODS)
def test_real_recipes_are_the_code_defaults_with_disjoint_attackers(method: str) -> None:
    """baselines/real/NAME.json is what `--benchmark real` trains with; the VITA family trains
    against architectures none of pabench's real protocols scores with (SPAct's NT-Xent branch
    is the paper's ResNet-50: that overlap is recorded in its records' flags; the papers'
    reproduction protocols score with the papers' own attackers, overlap included)."""
    recipe = load_recipe(ROOT / "baselines" / "real" / f"{method}.json", method, real=True)
    assert recipe == default_recipe(method, real=True)
    assert recipe.target == "r3d_18" and recipe.width >= 32
    if isinstance(recipe, VitaRecipe):
        real = {a for p in protocols_for("real") if p.role != "reproduction"
                for a in p.attackers}
        assert not set(recipe.budget_models) & real


def test_torchrun_two_ranks_train_identical_anonymizers_on_real_pools(corpus: Path,
                                                                      tmp_path) -> None:
    """Two torchrun ranks on a fresh home: rank 0 decodes the real datasets while rank 1 waits,
    each rank draws its own share of every batch from the memory-mapped pools, and DDP keeps
    f_A identical on both."""
    worker = ROOT / "tests" / "learned_ddp_worker.py"
    pairs = []
    for method, micro in (("vita", _MICRO), ("spact", _MICRO_SSL)):
        recipe = tmp_path / f"{method}.json"
        recipe.write_text(json.dumps(micro))
        pairs += [method, str(recipe)]
    torchrun(worker, tmp_path / "logs", str(tmp_path), f"real:{corpus}", *pairs,
             env={**os.environ, "PABENCH_HOME": str(tmp_path / "home")})
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["world"] == 2
    for method in ("vita", "spact"):
        assert ranks[0][method] == ranks[1][method]  # same steps, same weights on both ranks
        assert ranks[0][method]["steps"]["minimax"] == _MICRO["steps"]
