"""`pabench datasets view --anonymizer` runs the anonymizer on a few windows at a time, at the
clip size `pabench evaluate` uses, so its memory is bounded on long, large videos: measured by
the largest batch a recording anonymizer is handed, not by time."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from test_fiftyone import Recording, _fake

from pabench.integrations.fiftyone_view import ANONYMIZER_PIXELS, _anonymize, clip_shape


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
