"""Initial weights a protocol names: read offline from TORCH_HOME or --weights-dir (a one-line
error naming the file otherwise), loaded but for the classifier, the input normalised as the
weights expect, and keyed by name and file hash only where a protocol names them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.models
from quick import one_line_error, pabench_main

from pabench.data.clipset import ClipSet
from pabench.errors import PabenchError
from pabench.evaluation.config import EvaluationConfig
from pabench.evaluation.data import Run
from pabench.evaluation.fit import plan
from pabench.models import build_model
from pabench.models.weights import Normalized, weights_file, weights_transform
from pabench.protocols import PROTOCOLS

NAME = "ResNet18_Weights.IMAGENET1K_V1"
FILE = "resnet18-f37072fd.pth"  # the basename of torchvision's URL for NAME


def fake_weights(folder: Path, name: str = NAME, arch: str = "resnet18") -> dict:
    """A freshly built torchvision model's state dict saved where torchvision keeps `name`."""
    torch.manual_seed(7)
    member = torchvision.models.get_weight(name)
    state = torchvision.models.get_model(arch, weights=None,
                                         num_classes=len(member.meta["categories"])).state_dict()
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(state, folder / member.url.rsplit("/", 1)[1])
    return state


@pytest.fixture
def torch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    return tmp_path / "torch" / "hub" / "checkpoints"


def test_missing_weights_name_the_file_to_fetch(torch_home: Path) -> None:
    with pytest.raises(PabenchError) as e:
        build_model("resnet18", 5, 64, NAME)
    text = str(e.value)
    assert "\n" not in text and str(torch_home / FILE) in text
    assert "https://download.pytorch.org/models/" + FILE in text and "never downloads" in text


def test_weights_load_but_for_the_classifier(torch_home: Path) -> None:
    state = fake_weights(torch_home)
    net = build_model("resnet18", 5, 64, NAME)
    assert isinstance(net, Normalized)
    for key, value in net.model.state_dict().items():
        if key.startswith("fc."):
            assert value.shape[0] == 5  # the task's own fresh head
        else:
            assert torch.equal(value, state[key]), key
    t = weights_transform(NAME)
    assert torch.allclose(net.mean, torch.tensor(t["mean"]).view(1, -1))
    assert t["crop"] == (224,) and t["resize"] == (256,)
    x = torch.rand(2, 3, 32, 32)
    shape = (1, 3, 1, 1)
    net.eval()
    expected = net.model((x - net.mean.view(shape)) / net.std.view(shape))
    assert torch.allclose(net(x), expected)


def test_a_weights_dir_replaces_torch_home(tmp_path: Path, torch_home: Path) -> None:
    fake_weights(tmp_path / "mine")
    assert weights_file(NAME, tmp_path / "mine") == tmp_path / "mine" / FILE
    with pytest.raises(PabenchError, match="not found"):
        weights_file(NAME)


def test_video_weights_and_wrong_pairs(torch_home: Path) -> None:
    fake_weights(torch_home, "R3D_18_Weights.KINETICS400_V1", "r3d_18")
    net = build_model("r3d_18", 3, 112, "R3D_18_Weights.KINETICS400_V1")
    assert net(torch.rand(1, 3, 4, 32, 32)).shape == (1, 3)
    with pytest.raises(PabenchError, match="are not weights of model 'resnet18'"):
        build_model("resnet18", 3, 64, "R3D_18_Weights.KINETICS400_V1")
    with pytest.raises(PabenchError, match="not a torchvision weights enum member"):
        build_model("resnet18", 3, 64, "Nope_Weights.X")


def test_foreign_file_is_one_line(torch_home: Path) -> None:
    torch_home.mkdir(parents=True)
    torch.save(torchvision.models.mobilenet_v2(weights=None).state_dict(), torch_home / FILE)
    with pytest.raises(PabenchError, match=f"{FILE}: not {NAME} for resnet18"):
        build_model("resnet18", 3, 64, NAME)


def _clips(name: str) -> ClipSet:
    videos = np.zeros((4, 16, 8, 8, 3), np.uint8)
    return ClipSet(name=name, split="train", videos=videos, video_ids=list("abcd"),
                   fingerprint="f" * 16, action=np.arange(4) % 2, action_classes=("a", "b"))


def _run(tmp_path: Path, protocol: str) -> Run:
    return Run(protocol=PROTOCOLS.get(protocol), benchmark="real", preset="-",
               data_dir=tmp_path, work_dir=tmp_path, device="cpu", seeds=(0,), frames=16,
               size=112, progress=None)


def test_only_named_weights_enter_the_cache_key(torch_home: Path, tmp_path: Path) -> None:
    penalty = "paper-penalty-t1-ucf101-vispr1"
    state = fake_weights(torch_home, "R3D_18_Weights.KINETICS400_V1", "r3d_18")
    train = _clips("ucf101")
    first = plan(_run(tmp_path, penalty), "r3d_18", "action", train, train, 0, "t")
    assert first.spec.weights == "R3D_18_Weights.KINETICS400_V1"
    state["fc.bias"] = state["fc.bias"] + 1  # another file under the same name: another key
    torch.save(state, torch_home / "r3d_18-b3b3357e.pth")
    second = plan(_run(tmp_path, penalty), "r3d_18", "action", train, train, 0, "t")
    assert second.weights_path != first.weights_path
    spact = plan(_run(tmp_path, "paper-spact-t1-ucf101-vispr1"), "r3d_18", "action", train,
                 train, 0, "t")
    assert spact.spec.weights is None


def test_evaluate_fails_before_work_without_the_weights(torch_home: Path) -> None:
    config = EvaluationConfig("baseline:identity", "paper-penalty-t1-ucf101-vispr1",
                              benchmark="real")
    with pytest.raises(PabenchError, match="r3d_18-b3b3357e.pth: weights"):
        config.resolved()
    one_line_error(pabench_main("evaluate", "baseline:identity", "--benchmark", "real",
                                "--protocol", "paper-penalty-t1-ucf101-vispr1"),
                   2, "never downloads weights")
