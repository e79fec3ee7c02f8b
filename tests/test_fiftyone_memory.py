"""`pabench datasets view --anonymizer` runs the anonymizer on a few windows at a time, at the
clip size `pabench evaluate` uses, so its memory is bounded on long, large videos: measured by
the largest batch a recording anonymizer is handed, not by time."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from test_fiftyone import split  # noqa: F401 (the module-scoped synth-pa split fixture)
from typer.testing import CliRunner

from pabench.cli import app
from pabench.integrations import fiftyone_view
from pabench.integrations.fiftyone_view import ANONYMIZER_PIXELS, _anonymize, clip_shape


class Recording(torch.nn.Module):
    """An identity anonymizer that keeps the shape of every batch it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[list[int]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.shapes.append(list(x.shape))
        return x.clone()


def _fake(module: Recording) -> Any:
    return SimpleNamespace(module=module, name="recording", sha256="0" * 64)


@pytest.mark.parametrize(("length", "height", "width", "calls"), [
    (300, 240, 320, [1] * 19),  # a 10 s 320x240 clip at its stored size: one window a call
    (100, 112, 112, [4, 3]),  # the real protocols' 112 px: four 16-frame windows a call
])
def test_windows_go_in_bounded_batches(length: int, height: int, width: int,
                                       calls: list[int]) -> None:
    video = np.random.default_rng(0).integers(0, 256, (length, height, width, 3), np.uint8)
    module = Recording()
    out = _anonymize(_fake(module), video, 16, "clip.mp4")
    assert np.array_equal(out, video)  # every frame anonymized, in place
    assert [s[0] for s in module.shapes] == calls
    assert all(s[1:] == [3, 16, height, width] for s in module.shapes)
    largest = max(s[0] for s in module.shapes) * 16 * height * width
    assert largest <= max(ANONYMIZER_PIXELS, 16 * height * width)  # one window at the least


def test_clip_shape_is_evaluates_unless_chosen() -> None:
    synth = SimpleNamespace(source={"generator": "pa-synth", "frames": 8})
    real = SimpleNamespace(source={})
    assert clip_shape(synth, None, None, anonymized=True) == (8, None)  # stored at its size
    assert clip_shape(real, None, None, anonymized=True) == (16, 112)
    assert clip_shape(real, None, None, anonymized=False) == (16, None)
    assert clip_shape(real, 8, 64, anonymized=True) == (8, 64)
    assert clip_shape(synth, 4, 48, anonymized=False) == (4, 48)


@pytest.mark.fiftyone
def test_view_runs_the_anonymizer_at_the_chosen_frames_and_size(
    fo: Any, split: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    module = Recording()
    monkeypatch.setattr(fiftyone_view, "_load_anonymizer", lambda spec, meta: _fake(module))
    result = CliRunner().invoke(app, ["datasets", "view", str(split), "--anonymizer",
                                      "baseline:identity", "--frames", "4", "--size", "48",
                                      "--no-app", "--json"])
    assert result.exit_code == 0, result.output
    made = json.loads(result.stdout)
    assert module.shapes and all(s == [2, 3, 4, 48, 48] for s in module.shapes)  # 8 frames
    dataset = fo.load_dataset(made["name"])
    for piece in ("raw", "anonymized"):
        sample = dataset.select_group_slices(piece).first()
        assert sample.metadata.frame_width == sample.metadata.frame_height > 48  # a preview
    refused = CliRunner().invoke(app, ["datasets", "view", str(split), "--size", "0"])
    assert refused.exit_code != 0 and "--size" in refused.output
