"""Person/face detectors for obfuscation baselines on real video.

pa-synth uses the in-repo segmenter (`pabench.anonymizers.segmenter`); real video uses either
OpenCV's built-in detectors (HOG people detector and the Haar frontal-face cascade, both shipped
with opencv-python-headless, so nothing is downloaded) or a torchvision detector loaded from a
local weights file the user provides. Both run frame by frame in numpy, so baselines built on
them are evaluated in process but cannot be exported as tensor-only submission files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np
import torch
from torch import nn

from pabench.errors import PabenchError

COCO_PERSON = 1
_DETECT_SHORT_SIDE = 320  # OpenCV's windows are 24 (face) and 64x128 (HOG) pixels


@dataclass
class Detections:
    """One frame's detections; boxes are int [N, 4] as (x0, y0, x1, y1), end-exclusive."""

    person_boxes: np.ndarray
    face_boxes: np.ndarray
    person_mask: np.ndarray  # uint8 [H, W] in {0, 1}
    face_mask: np.ndarray  # uint8 [H, W] in {0, 1}


class Detector(Protocol):
    """Anything that finds people and faces in one uint8 RGB frame [H, W, 3]."""

    def detect(self, frame: np.ndarray) -> Detections: ...


def boxes_to_mask(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    mask = np.zeros((height, width), np.uint8)
    for x0, y0, x1, y1 in boxes:
        mask[max(0, y0) : min(height, y1), max(0, x0) : min(width, x1)] = 1
    return mask


def _as_boxes(rects: np.ndarray | tuple, scale: float) -> np.ndarray:
    """OpenCV (x, y, w, h) rectangles on the resized frame -> (x0, y0, x1, y1) on the original."""
    r = np.asarray(rects, np.float64).reshape(-1, 4)
    xyxy = np.concatenate([r[:, :2], r[:, :2] + r[:, 2:]], 1) / scale
    return np.concatenate([np.floor(xyxy[:, :2]), np.ceil(xyxy[:, 2:])], 1).astype(np.int64)


class OpenCVDetector:
    """Haar frontal faces + HOG people; a visible face also counts as (part of) a person.

    HOG misses people in close-ups and partial views, but body obfuscation must still cover
    their faces, so every face box is added to the person boxes. Small frames are upscaled so
    the short side is at least 320 pixels, since both detectors have fixed minimum windows.
    """

    def __init__(self, hog_threshold: float = 0.5, face_neighbors: int = 5) -> None:
        path = Path(cv2.data.haarcascades) / "haarcascade_frontalface_default.xml"
        self.face = cv2.CascadeClassifier(str(path))
        if self.face.empty():
            raise PabenchError(f"could not load OpenCV's Haar face cascade from {path}")
        self.hog = cv2.HOGDescriptor()
        self.hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
        self.hog_threshold = hog_threshold
        self.face_neighbors = face_neighbors

    def detect(self, frame: np.ndarray) -> Detections:
        h, w = frame.shape[:2]
        scale = max(1.0, _DETECT_SHORT_SIDE / min(h, w))
        img = cv2.resize(frame, (round(w * scale), round(h * scale))) if scale > 1 else frame
        gray = cv2.equalizeHist(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))
        faces = _as_boxes(self.face.detectMultiScale(
            gray, scaleFactor=1.1, minNeighbors=self.face_neighbors, minSize=(24, 24)), scale)
        rects, weights = self.hog.detectMultiScale(gray, winStride=(8, 8), padding=(8, 8),
                                                   scale=1.05)
        keep = np.asarray(weights).reshape(-1) >= self.hog_threshold
        people = np.concatenate([_as_boxes(rects, scale)[keep], faces])
        return Detections(people, faces, boxes_to_mask(people, h, w), boxes_to_mask(faces, h, w))


_ARCHS = {  # state-dict key that identifies the architecture -> torchvision builder name
    "roi_heads.mask_head.": "maskrcnn_resnet50_fpn",
    "backbone.body.layer4.": "fasterrcnn_resnet50_fpn",
    "backbone.body.0.": "fasterrcnn_mobilenet_v3_large_fpn",
}


def _infer_arch(state: dict[str, torch.Tensor]) -> str:
    for marker, arch in _ARCHS.items():
        if any(k.startswith(marker) for k in state):
            return arch
    raise PabenchError("unrecognised detector weights: expected a state dict of one of "
                       f"{', '.join(sorted(set(_ARCHS.values())))}")


class TorchvisionDetector:
    """A COCO person detector from a local torchvision state-dict file (no download).

    Mask R-CNN gives pixel masks; Faster R-CNN gives boxes, used as masks. COCO has no face
    class, so faces come from OpenCV's Haar cascade.
    """

    def __init__(self, weights_path: Path, score: float = 0.5) -> None:
        import torchvision.models.detection as det

        weights_path = Path(weights_path)
        if not weights_path.is_file():
            raise PabenchError(f"detector weights file not found: {weights_path}")
        try:
            state = torch.load(weights_path, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises several types for truncated or foreign files
            raise PabenchError(f"cannot read detector weights {weights_path}: "
                               f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
        if not isinstance(state, dict):
            raise PabenchError(f"detector weights {weights_path} are not a state dict")
        self.arch = _infer_arch(state)
        self.model = getattr(det, self.arch)(weights=None, weights_backbone=None)
        try:
            self.model.load_state_dict(state)
        except RuntimeError as e:
            raise PabenchError(f"detector weights {weights_path} do not fit {self.arch}: "
                               f"{str(e).splitlines()[0]}") from None
        self.model.eval()
        self.score = score
        self.faces = OpenCVDetector()

    @torch.no_grad()
    def detect(self, frame: np.ndarray) -> Detections:
        h, w = frame.shape[:2]
        x = torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1).float().div(255)
        out = self.model([x])[0]
        keep = (out["labels"] == COCO_PERSON) & (out["scores"] >= self.score)
        boxes = out["boxes"][keep]
        people = torch.cat([boxes[:, :2].floor(), boxes[:, 2:].ceil()], 1).long().numpy()
        if "masks" in out:
            person_mask = (out["masks"][keep, 0] > 0.5).any(0).numpy().astype(np.uint8)
            if person_mask.ndim == 0:  # no detections: any() over an empty axis
                person_mask = np.zeros((h, w), np.uint8)
        else:
            person_mask = boxes_to_mask(people, h, w)
        faces = self.faces.detect(frame)
        return Detections(np.concatenate([people, faces.face_boxes]), faces.face_boxes,
                          np.maximum(person_mask, faces.face_mask), faces.face_mask)


class DetectorMasker(nn.Module):
    """Video [B, 3, T, H, W] -> masks [B, 2, T, H, W] (person, face) via a numpy detector.

    Box baselines take the box hull of each connected region of these masks, so Mask R-CNN's
    pixel masks serve both the box and the segmentation variants.
    """

    tensor_only = False

    def __init__(self, detector: Detector) -> None:
        super().__init__()
        self.detector = detector

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, t, h, w = x.shape
        frames = (x.permute(0, 2, 3, 4, 1) * 255).round().clamp(0, 255).to(torch.uint8)
        masks = np.zeros((b, 2, t, h, w), np.float32)
        for i in range(b):
            for j in range(t):
                d = self.detector.detect(frames[i, j].cpu().numpy())
                masks[i, 0, j], masks[i, 1, j] = d.person_mask, d.face_mask
        return torch.from_numpy(masks).to(x.device)
