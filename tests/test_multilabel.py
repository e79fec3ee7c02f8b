"""Label views and multi-label actions: a tiny P-HVU from the real builder, scored end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from pabench.anonymizers import Identity
from pabench.data.builders import p_hvu
from pabench.data.clipset import ClipSet, multi_hot
from pabench.data.hub import encode_mp4
from pabench.errors import PabenchError
from pabench.evaluation import evaluate
from pabench.protocols import PROTOCOLS, ClipSpec, Schedule
from pabench.submission import SubmissionMeta, from_module
from pabench.training import FitSpec, predict

ACTIONS = ["running", "waving", "juggling"]
OBJECTS = ["ball", "car", "tree"]
SCENES = ["beach", "forest", "street"]
BACKGROUND = np.array([[200, 180, 90], [40, 120, 40], [110, 110, 110]], np.uint8)
OBJECT_AT = [(2, 2, (230, 30, 30)), (2, 22, (30, 30, 230)), (22, 2, (250, 250, 250))]
CHEAP = dict(seeds=(0,), target="tiny3d", attackers=("tiny2d",),
             clip=ClipSpec(frames=8, size=32, test_clips=4),
             augment=("shift",), schedule=Schedule(max_epochs=8, patience=3, min_epochs=2,
                                                   batch_size=8, lr=3e-3),
             # the wiring of multi-label views, not the current generation's rules
             attacker_schedule=None, standardize=False, consistency_check=False)


def _clip(rng: np.random.Generator, scene: int, objects: list[int], actions: list[int]
          ) -> np.ndarray:
    """16 frames of 32x32: the scene is the background colour, objects are static coloured
    patches in fixed corners, actions are motion (a square running across, a square waving up
    and down) or a flicker (juggling), so each tag group is learnable from pixels."""
    frames = np.empty((16, 32, 32, 3), np.uint8)
    for t in range(16):
        f = np.broadcast_to(BACKGROUND[scene], (32, 32, 3)).astype(np.int16)
        f = f + rng.integers(-8, 9, (32, 32, 1))
        for k in objects:
            y, x, colour = OBJECT_AT[k]
            f[y:y + 8, x:x + 8] = colour
        if 0 in actions:
            f[13:18, 2 * t:2 * t + 5] = (255, 0, 255)
        if 1 in actions:
            y = 12 + abs(t % 8 - 4) * 3
            f[y:y + 5, 24:29] = (0, 255, 255)
        if 2 in actions:
            f = f + (40 if t % 2 else -40)
        frames[t] = f.clip(0, 255)
    return frames


def _subset(rng: np.random.Generator, n: int) -> list[int]:
    chosen = [k for k in range(n) if rng.random() < 0.5]
    return chosen or [int(rng.integers(n))]


@pytest.fixture(scope="module")
def tiny_p_hvu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """P-HVU's source layout (taxonomy, HVU CSVs, clips) with 40 train and 24 test clips."""
    src = tmp_path_factory.mktemp("hvu-source")
    taxonomy = [(t, c) for c, tags in [("action", ACTIONS), ("object", OBJECTS),
                                       ("scene", SCENES), ("concept", ["outdoor"])] for t in tags]
    pd.DataFrame(taxonomy, columns=["Tag", "Category"]).to_csv(src / p_hvu.TAXONOMY, index=False)
    (src / p_hvu.CLIP_DIR).mkdir()
    rng = np.random.default_rng(0)
    for split, n in [("test", 24), ("train", 40)]:
        rows = []
        for i in range(n):
            scene, objects, actions = i % 3, _subset(rng, 3), _subset(rng, 3)
            tags = ([ACTIONS[a] for a in actions] + [OBJECTS[o] for o in objects]
                    + [SCENES[scene], "outdoor"])
            vid = f"{split}{i:03d}"
            rows.append(("|".join(tags), vid, "1.5", "3.5"))
            clip = encode_mp4(_clip(rng, scene, objects, actions))
            (src / p_hvu.CLIP_DIR / f"{vid}_1.5_3.5.mp4").write_bytes(clip)
        pd.DataFrame(rows, columns=p_hvu.COLUMNS).to_csv(
            src / f"{p_hvu.CSV_FILES[split]}.csv", index=False)
    out = tmp_path_factory.mktemp("built")
    report = p_hvu.build(src, out / "p-hvu")
    assert report.videos == {"test": 24, "train": 40}
    return out


def test_multi_hot_from_index_lists_and_single_indices() -> None:
    lists = multi_hot(np.array([np.array([0, 2]), np.array([], np.int64), [1]], dtype=object), 3)
    assert lists.dtype == np.float32
    assert lists.tolist() == [[1, 0, 1], [0, 0, 0], [0, 1, 0]]
    assert multi_hot(np.array([2, 0]), 3).tolist() == [[0, 0, 1], [1, 0, 0]]
    with pytest.raises(PabenchError, match="class index 3 outside 0..2"):
        multi_hot([[0, 3]], 3)


def test_label_view_fingerprints_and_unknown_group() -> None:
    clips = ClipSet("p-hvu", "test", np.zeros((2, 1, 4, 4, 3), np.uint8), ["a", "b"], "fp",
                    label_groups={"objects": (("ball", "car"), np.array([[1], [0, 1]], object)),
                                  "scenes": (("beach",), np.array([[0], [0]], object))})
    objects, scenes = clips.view("objects"), clips.view("scenes")
    assert objects.attribute_names == objects.action_classes == ("ball", "car")
    assert objects.attributes.tolist() == [[0, 1], [1, 1]] and objects.videos is clips.videos
    assert len({clips.fingerprint, objects.fingerprint, scenes.fingerprint}) == 3
    anonymized = clips.with_videos(clips.videos, "x")
    assert anonymized.view("objects").fingerprint != objects.fingerprint
    with pytest.raises(PabenchError) as err:
        clips.view("objets")
    message = str(err.value)
    assert "\n" not in message and "Did you mean 'objects'?" in message
    assert "Valid: objects, scenes" in message


def test_video_models_predict_sigmoid_per_clip_when_multilabel() -> None:
    spec = FitSpec(model="tiny3d", task="multilabel", num_outputs=5, clip_frames=4,
                   input_size=16, schedule=Schedule(), augment=(), seed=0)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.LazyLinear(5))
    videos = np.random.default_rng(0).integers(0, 255, (3, 12, 16, 16, 3), dtype=np.uint8)
    out = predict(net, spec, videos, clips=3)
    assert out.shape == (3, 3, 5) and ((out > 0) & (out < 1)).all()
    assert not np.allclose(out.sum(-1), 1)  # independent tags, not a softmax


class Black(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def test_p_hvu_end_to_end_multilabel(tiny_p_hvu: Path, tmp_path: Path) -> None:
    proto = PROTOCOLS.get("p-hvu").model_copy(update={"id": "test-p-hvu", **CHEAP})
    run = dict(benchmark="real", data_dir=tiny_p_hvu, output_dir=tmp_path / "results", workers=1)
    ident = evaluate("baseline:identity", proto, **run)
    m = ident.metrics
    assert m.action_metric == "cmap" and ident.raw is not None and ident.raw.action_metric == "cmap"
    for value in (m.action, m.action_clip, *m.action_ci, m.privacy_cmap):
        assert 0 <= value <= 100
    assert list(ident.attackers[0].per_attribute) == OBJECTS
    assert set(ident.benchmark.fingerprints) == {"p-hvu/train", "p-hvu/test"}
    black = evaluate(from_module("black", Black()), proto, **run)
    assert black.metrics.action_metric == "cmap"
    assert black.raw is not None and black.raw.privacy_cmap == m.privacy_cmap
    # a constant input leaves the attacker the tag frequencies (AP ~ prevalence, ~60 here)
    assert m.privacy_cmap > black.metrics.privacy_cmap + 20
    assert m.action > black.metrics.action + 10  # the multi-label target learned
    assert black.metrics.privacy_drop is not None and black.metrics.privacy_drop > 0.2
    assert black.metrics.action_drop is not None

    novel = PROTOCOLS.get("novel-p-hvu-scenes-objects").model_copy(
        update={"id": "test-novel-p-hvu", **CHEAP})
    known = {"datasets": ["p-hvu:actions", "p-hvu:scenes"], "action_classes": ACTIONS,
             "attributes": SCENES}
    sub = from_module("identity", Identity(), SubmissionMeta(name="identity", training_data=known))
    rec = evaluate(sub, novel, **{**run, "output_dir": None})
    assert rec.submission.meta.novel_eligibility == "declared-disjoint"
    assert rec.metrics == m  # same views, same cached models: only eligibility differs
    for overlap, culprit in [({"attributes": [*SCENES, "ball"]}, "ball"),
                             ({"datasets": ["p-hvu"]}, "p-hvu"),
                             ({"datasets": ["p-hvu:objects"]}, "p-hvu:objects")]:
        meta = SubmissionMeta(name="identity", training_data={**known, **overlap})
        with pytest.raises(PabenchError, match=f"not eligible.*{culprit}"):
            evaluate(from_module("identity", Identity(), meta), novel, **run)
