"""pa-synth: a procedural video benchmark where privacy lives in appearance and action in motion.

Every clip samples *all* motion processes; the action only decides which of them evolve over time,
the others are frozen at a random phase. So one frame carries no action information, while the
appearance attributes are drawn independently of the action and are visible in every frame.
Shapes are rendered from signed distances with one-pixel anti-aliasing for sub-pixel motion.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from pabench.errors import PabenchError

KNOWN_ACTIONS = (
    "walk_left", "walk_right", "jump", "wave", "spin", "approach", "recede", "zigzag",
)
NOVEL_ACTIONS = ("rise", "sink", "shake", "jumping_jacks", "pulse", "diagonal")
# Which motion processes each action animates (the rest stay frozen at a random phase).
_MOTION = {
    "walk_left": {"travel_x": -1}, "walk_right": {"travel_x": 1}, "jump": {"bounce": 1},
    "wave": {"arm": 1}, "spin": {"width": 1}, "approach": {"scale": 1}, "recede": {"scale": -1},
    "zigzag": {"zigzag": 1},
    "rise": {"travel_y": -1}, "sink": {"travel_y": 1}, "shake": {"shake": 1},
    "jumping_jacks": {"bounce": 1, "arm": 1}, "pulse": {"pulse": 1},
    "diagonal": {"travel_x": 1, "travel_y": -1},
}
KNOWN_ATTRIBUTES = ("skin_color", "face", "gender", "nudity", "relationship")
NOVEL_ATTRIBUTES = ("hair_color", "tattoo", "landmark", "age", "weight")
SCENES = ("indoor", "street", "forest", "beach")
OBJECTS = ("none", "ball", "box", "stick")

# Two skin tones of equal luma (0.299R + 0.587G + 0.114B), so only hue tells them apart.
_SKIN = np.array([[0.85, 0.65, 0.35], [0.90, 0.538, 0.80]], dtype=np.float32)
_HAIR = np.array([[0.25, 0.17, 0.10], [0.93, 0.82, 0.35]], dtype=np.float32)  # dark, blond
_CLOTHES = np.array(
    [[0.15, 0.30, 0.75], [0.75, 0.15, 0.15], [0.20, 0.20, 0.22], [0.95, 0.95, 0.95],
     [0.55, 0.35, 0.70], [0.10, 0.55, 0.55], [0.85, 0.45, 0.05]], dtype=np.float32)
_TATTOO = np.array([0.05, 0.35, 0.05], dtype=np.float32)


@dataclass
class SynthClip:
    """One rendered clip: pixels, labels and the masks obfuscation baselines train on."""

    video: np.ndarray  # uint8 [T, H, W, 3]
    person_mask: np.ndarray  # uint8 [T, H, W] in {0, 1}
    face_mask: np.ndarray  # uint8 [T, H, W] in {0, 1}
    action: str
    attributes: dict[str, int]
    face_frames: np.ndarray  # uint8 [T]: face visible in this frame
    scene: str
    object: str


def _aa(d: np.ndarray, px: float) -> np.ndarray:
    """Coverage of a shape from its signed distance, with one-pixel anti-aliasing."""
    return np.clip(0.5 - d / px, 0.0, 1.0)


def _circle(x, y, cx, cy, r):
    return np.sqrt((x - cx) ** 2 + (y - cy) ** 2) - r


def _box(x, y, cx, cy, hx, hy):
    qx, qy = np.abs(x - cx) - hx, np.abs(y - cy) - hy
    outside = np.sqrt(np.maximum(qx, 0) ** 2 + np.maximum(qy, 0) ** 2)
    return outside + np.minimum(np.maximum(qx, qy), 0)


def _capsule(x, y, ax, ay, bx, by, r):
    px, py, dx, dy = x - ax, y - ay, bx - ax, by - ay
    h = np.clip((px * dx + py * dy) / (dx * dx + dy * dy + 1e-9), 0, 1)
    return np.sqrt((px - dx * h) ** 2 + (py - dy * h) ** 2) - r


def _paint(img: np.ndarray, alpha: np.ndarray, color: np.ndarray) -> None:
    alpha = np.broadcast_to(alpha, img.shape[:-1])
    m = alpha > 0  # shapes are small: blend only the pixels they touch
    a = alpha[m][:, None]
    img[m] = img[m] * (1 - a) + a * color


def _background(rng: np.random.Generator, scene: int, landmark: int, x, y, px) -> np.ndarray:
    """A static textured background; the scene type and a landmark tower are privacy labels."""
    h, w = y.shape[0], x.shape[1]
    img = np.empty((h, w, 3), np.float32)
    jitter = rng.uniform(-0.05, 0.05, 3).astype(np.float32)
    if scene == 0:  # indoor: wallpaper stripes over a floor
        stripes = 0.5 + 0.5 * np.sin(2 * np.pi * (y * rng.uniform(6, 9) + rng.uniform()))
        img[:] = np.array([0.70, 0.62, 0.50]) + 0.06 * stripes[..., None]
        _paint(img, _aa(0.75 - y + 0 * x, px), np.array([0.45, 0.32, 0.22]))
    elif scene == 1:  # street: grey buildings with windows
        blocks = (np.floor(x * rng.uniform(3, 5) + rng.uniform()) % 2)
        img[:] = np.array([0.55, 0.57, 0.60]) + 0.08 * (blocks + 0 * y)[..., None]
        win = (np.sin(2 * np.pi * x * 10) > 0.6) & (np.sin(2 * np.pi * y * 8) > 0.6) & (y < 0.7)
        img[win] = np.array([0.35, 0.40, 0.50])
        _paint(img, _aa(0.78 - y + 0 * x, px), np.array([0.30, 0.30, 0.32]))
    elif scene == 2:  # forest: trunks on green
        trunks = np.sin(2 * np.pi * (x * rng.uniform(5, 8) + rng.uniform())) > 0.75
        img[:] = np.array([0.25, 0.55, 0.25])
        img[np.broadcast_to(trunks, (h, w))] = np.array([0.40, 0.28, 0.15])
        _paint(img, _aa(0.80 - y + 0 * x, px), np.array([0.20, 0.40, 0.15]))
    else:  # beach: sky over sand with a wavy shoreline
        img[:] = np.array([0.55, 0.75, 0.95])
        shore = 0.62 + 0.03 * np.sin(2 * np.pi * (x * 3 + rng.uniform()))
        _paint(img, _aa(shore - y, px), np.array([0.92, 0.85, 0.62]))
    img += jitter
    img += rng.normal(0, 0.025, img.shape).astype(np.float32)
    if landmark:
        tx = rng.uniform(0.1, 0.9)
        tower = np.minimum(_box(x, y, tx, 0.32, 0.035, 0.22), _circle(x, y, tx, 0.08, 0.05))
        _paint(img, _aa(tower, px), np.array([0.15, 0.12, 0.20]))
    return img


def head_shapes(x, y, cx, head_y, head_r, s, skin, hair, with_face, cap_drop: float,
                band: tuple[float, float]) -> list[tuple[np.ndarray, np.ndarray]]:
    """A head: skin, a hair cap down to `cap_drop` above its centre, and a face seen (a
    horizontal eye band of half-size `band`) or the back of the head (the same band turned
    upright, a parting): equal dark area, so only the pattern, not the mean colour, tells them
    apart. Signed distances with their colours, in painting order."""
    head = _circle(x, y, cx, head_y, head_r)
    cap = np.maximum(_circle(x, y, cx, head_y, head_r * 1.08), y - (head_y - cap_drop * s))
    eyes = _box(x, y, cx, head_y + 0.01 * s, band[0] * s, band[1] * s)
    back = _box(x, y, cx, head_y + 0.01 * s, band[1] * s, band[0] * s)
    return [(head, skin), (cap, hair),
            (np.where(with_face, eyes, back), np.array([0.08, 0.06, 0.06], np.float32))]


def _tri(u: np.ndarray) -> np.ndarray:
    return 2 * np.abs(u - np.floor(u + 0.5))


FLAT_VERSION = 2
"""The last generator version this module renders (v3 on: `articulated`). v2 places the second
person independently of the first; in v1 it stood at a fixed offset from the first's mean
position, so the gap between them was constant for every action without horizontal travel and
one frame told walking from the rest."""


def render_clip(rng: np.random.Generator, action: str, frames: int, size: int,
                version: int = FLAT_VERSION) -> SynthClip:
    """Sample appearance and motion for one clip and render it (`version`: the generator's,
    1 or 2)."""
    t = np.linspace(0.0, 1.0, frames, dtype=np.float32)[:, None, None]
    px = 1.0 / size
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size
    y, x = coords[None, :, None], coords[None, None, :]
    motion = _MOTION[action]

    def proc(name: str) -> tuple[np.ndarray, float]:
        # Active processes run over time; frozen ones sit at a random point of the same cycle.
        u0 = rng.uniform()
        if name in motion:
            return t + 0 * u0, float(motion[name])
        return np.full_like(t, u0), float(rng.choice([-1.0, 1.0]))

    attrs = {a: int(rng.integers(0, 2)) for a in KNOWN_ATTRIBUTES + NOVEL_ATTRIBUTES}
    scene, obj = int(rng.integers(len(SCENES))), int(rng.integers(len(OBJECTS)))
    size_base = (0.78 if attrs["age"] == 0 else 0.58) * rng.uniform(0.93, 1.07)
    width_base = (1.0 if attrs["weight"] == 0 else 1.45) * rng.uniform(0.92, 1.08)

    u, d = proc("travel_x")
    cx = rng.uniform(0.38, 0.62) + d * 0.22 * (u - 0.5)
    u, d = proc("zigzag")
    cx = cx + 0.09 * (_tri(2 * u) - 0.5)
    u, d = proc("shake")
    cx = cx + 0.035 * np.sin(2 * np.pi * 4 * u)
    u, d = proc("travel_y")
    fy = rng.uniform(0.86, 0.92) + d * 0.12 * (u - 0.5) - 0.06
    u, d = proc("bounce")
    fy = fy - 0.10 * np.abs(np.sin(np.pi * 2 * u))
    u, d = proc("scale")
    s = size_base * (1 + d * 0.30 * (u - 0.5))
    u, d = proc("pulse")
    s = s * (1 + 0.12 * np.sin(2 * np.pi * 2 * u))
    u, d = proc("width")
    wf = width_base * (1 + 0.30 * np.sin(2 * np.pi * 1.5 * u))
    u, d = proc("arm")
    arm = 1.35 + 0.95 * np.sin(2 * np.pi * 2 * u)

    skin = _SKIN[attrs["skin_color"]] + rng.uniform(-0.03, 0.03, 3).astype(np.float32)
    hair = _HAIR[attrs["hair_color"]] + rng.uniform(-0.04, 0.04, 3).astype(np.float32)
    cloth = _CLOTHES[rng.integers(len(_CLOTHES))]
    torso_color = skin if attrs["nudity"] else cloth
    legs_color = skin if attrs["nudity"] else _CLOTHES[rng.integers(len(_CLOTHES))] * 0.7
    face_frames = np.zeros(frames, np.uint8)
    if attrs["face"]:
        span = int(rng.integers((frames + 1) // 2, frames + 1))
        start = int(rng.integers(0, frames - span + 1))
        face_frames[start : start + span] = 1
    visible = face_frames[:, None, None].astype(bool)

    img = np.broadcast_to(
        _background(rng, scene, attrs["landmark"], x[0], y[0], px), (frames, size, size, 3)
    ).copy()
    person = np.zeros((frames, size, size), np.float32)
    face = np.zeros_like(person)

    def figure(cx, fy, s, wf, arm, with_face, long_hair, hcolor, tcolor, lcolor, extras):
        torso_y, head_y, hw = fy - 0.30 * s, fy - 0.53 * s, 0.075 * s * wf
        head_r = 0.11 * s
        shapes = []
        if long_hair:
            shapes.append((_box(x, y, cx, head_y + 0.09 * s, 0.13 * s, 0.12 * s), hcolor))
        for side in (-1, 1):
            shapes.append((_capsule(x, y, cx + side * 0.03 * s * wf, fy - 0.17 * s,
                                    cx + side * 0.06 * s, fy, 0.03 * s), lcolor))
        shapes.append((_box(x, y, cx, torso_y, hw, 0.13 * s), tcolor))
        hand = []
        for side, ang in ((1, arm), (-1, 1.35 + 0 * arm)):
            sx, sy = cx + side * hw, fy - 0.40 * s
            ex, ey = sx + side * 0.17 * s * np.sin(ang), sy + 0.17 * s * np.cos(ang)
            shapes.append((_capsule(x, y, sx, sy, ex, ey, 0.026 * s), skin))
            hand.append((ex, ey))
        shapes.extend(head_shapes(x, y, cx, head_y, head_r, s, skin, hcolor, with_face, 0.035,
                                  (0.075, 0.03)))
        head = shapes[-3][0]
        shapes.extend(extras(hand[0], s, torso_y, hw))
        cover = np.zeros(img.shape[:3], np.float32)
        for d, color in shapes:
            a = _aa(d, px).astype(np.float32)
            _paint(img, a, np.asarray(color, np.float32))
            np.maximum(cover, a, out=cover)
        return cover, _aa(head - 0.01 * s, px)

    if attrs["relationship"] and version >= 2:
        side, ox = float(rng.choice([-1.0, 1.0])), float(rng.uniform(0.12, 0.88))
    elif attrs["relationship"]:
        side = 1.0 if float(np.mean(cx)) < 0.5 else -1.0
        ox = float(np.clip(np.mean(cx) + side * 0.30, 0.12, 0.88))
    if attrs["relationship"]:
        other = _CLOTHES[rng.integers(len(_CLOTHES))]
        p2, f2 = figure(ox, 0.88, size_base * 0.85, 1.0, 1.35 + side * 0.5, False, False,
                        _HAIR[0], other, other * 0.6, lambda *a: [])
        person, face = np.maximum(person, p2), np.maximum(face, f2)

    def extras(hand, s, torso_y, hw):
        out = []
        hx, hy = hand
        if obj == 1:
            out.append((_circle(x, y, hx, hy, 0.05 * s), np.array([0.9, 0.3, 0.1], np.float32)))
        elif obj == 2:
            out.append((_box(x, y, hx, hy, 0.045 * s, 0.045 * s), np.array([0.6, 0.4, 0.2])))
        elif obj == 3:
            out.append((_capsule(x, y, hx, hy - 0.10 * s, hx, hy + 0.04 * s, 0.018 * s),
                        np.array([0.3, 0.2, 0.1], np.float32)))
        if attrs["tattoo"]:
            d = np.abs(x - (cx - hw * 0.4)) + np.abs(y - (torso_y - 0.05 * s)) - 0.045 * s
            out.append((d, _TATTOO))
        return out

    p1, f1 = figure(cx, fy, s, wf, arm, visible, attrs["gender"], hair, torso_color, legs_color,
                    extras)
    person, face = np.maximum(person, p1), np.maximum(face, f1)
    video = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
    return SynthClip(
        video=video, person_mask=(person > 0.5).astype(np.uint8),
        face_mask=(face > 0.5).astype(np.uint8), action=action, attributes=attrs,
        face_frames=face_frames, scene=SCENES[scene], object=OBJECTS[obj],
    )


MASK_PERSON, MASK_FACE = 85, 170
"""Grey levels of a stored mask image (a face pixel that is also a person pixel is 255), so
one lossless PNG keeps both masks exactly and is readable by eye."""


def encode_masks(person: np.ndarray, face: np.ndarray) -> bytes:
    """A clip's person and face masks (uint8 [T, H, W] in {0, 1}) as one PNG of its frames
    stacked vertically: deterministic bytes (so builds keep one fingerprint) at a few bytes
    per frame, where an .npz would carry a zip timestamp."""
    t, h, w = person.shape
    grey = (person * MASK_PERSON + face * MASK_FACE).astype(np.uint8).reshape(t * h, w)
    ok, png = cv2.imencode(".png", grey)
    assert ok, "OpenCV failed to encode a PNG"
    return png.tobytes()


def decode_masks(data: bytes, frames: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """`encode_masks`' bytes back to (person, face) uint8 [T, H, W]; a file of another shape
    or with other grey levels raises a one-line PabenchError naming `name`."""
    grey = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if grey is None or grey.ndim != 2 or grey.dtype != np.uint8 or grey.shape[0] % frames:
        raise PabenchError(f"{name}: not a mask image of {frames} stacked frames")
    if not np.isin(grey, (0, MASK_PERSON, MASK_FACE, MASK_PERSON + MASK_FACE)).all():
        raise PabenchError(f"{name}: mask image has grey levels other than 0, "
                           f"{MASK_PERSON}, {MASK_FACE} and {MASK_PERSON + MASK_FACE}")
    stack = grey.reshape(frames, -1, grey.shape[1])
    return (stack & 1).astype(np.uint8), ((stack >> 1) & 1).astype(np.uint8)
