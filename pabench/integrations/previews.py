"""Playable previews of pabench's lossless clips: H.264 yuv420p, which browsers, the Hub's
viewer and the FiftyOne App play (pabench's lossless RGB masters they do not)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

PREVIEW_MIN_SIDE = 128  # tiny clips are upscaled (nearest) so yuv420p keeps their colours
PREVIEW_OPTIONS = (("crf", "12"), ("preset", "veryfast"))  # libx264's, for every preview


def encode_preview(video: np.ndarray, fps: float, path: Path) -> tuple[int, int]:
    """Write `video` (uint8 [T, H, W, 3]) as H.264 yuv420p mp4 that the App and browsers play
    (pabench's lossless RGB masters do not); small clips are upscaled by a whole factor so
    chroma subsampling keeps their colours. Returns the preview's (height, width)."""
    h, w = preview_shape(video.shape)
    scale = _preview_scale(video.shape)
    if scale > 1:
        video = video.repeat(scale, axis=1).repeat(scale, axis=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4", options={"movflags": "+faststart"}) as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = dict(PREVIEW_OPTIONS)
        for frame in video[:, :h, :w]:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(
                np.ascontiguousarray(frame), format="rgb24")))
        container.mux(stream.encode())
    return h, w


def _preview_scale(shape: tuple[int, ...]) -> int:
    return max(1, -(-PREVIEW_MIN_SIDE // min(shape[1:3])))


def preview_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """(height, width) of the preview of a video of `shape` [T, H, W, 3]: upscaled, then cut
    to even sides (yuv420p needs them)."""
    scale = _preview_scale(shape)
    return shape[1] * scale // 2 * 2, shape[2] * scale // 2 * 2
