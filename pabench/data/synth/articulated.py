"""pa-synth generators v3-v5: articulated people whose actions live in limbs, hands and objects.

An action is a trajectory of joint angles (shoulder, elbow, hip, knee) and, for the hand-object
actions, of the object the hand holds; every limb the action does not use holds a random pose with
a slow wobble, so a raised arm in one frame says nothing and the action is in how limbs move.
Gross motion (where the person stands, drifting, the camera panning and shaking) is drawn
independently of the action, as are the private attributes, which sit on the moving body: skin on
the forearms, hands and face, a tattoo on the forearm, clothing, hair, a second person. Arms are
about two pixels thick at 32 px, so downsampling and blur remove what tells actions apart, as in
real video. Shapes are signed distances with one-pixel anti-aliasing (`scene`'s primitives).

Generator v4 adds context outside the person (`_context`): a prop that goes with the action's
place, told apart only by a fine texture, and in half the clips a mirror showing the person's
head and shoulders, outside the person's mask. In v5 the mirror shows the whole person live,
smaller: the person seen again where no box covers them.
"""

from __future__ import annotations

import numpy as np

from pabench.data.synth.poses import KNOWN_ACTIONS_V3, NOVEL_ACTIONS_V3, pose
from pabench.data.synth.scene import (
    _CLOTHES,
    _HAIR,
    _SKIN,
    _TATTOO,
    OBJECTS,
    SCENES,
    SynthClip,
    _aa,
    _box,
    _capsule,
    _circle,
    _paint,
    head_shapes,
)


def _joint(x0, y0, length, angle, side):
    return x0 + side * length * np.sin(angle), y0 + length * np.cos(angle)


def _background(rng: np.random.Generator, scene: int, landmark: int, x, y, px) -> np.ndarray:
    """Textured background over frame coordinates x, y [T, H, W] (the camera moves them)."""
    img = np.empty((*x.shape, 3), np.float32)
    if scene == 0:  # indoor: wallpaper stripes over a floor
        img[:] = np.array([0.70, 0.62, 0.50]) + 0.06 * (
            0.5 + 0.5 * np.sin(2 * np.pi * (y * rng.uniform(6, 9) + rng.uniform())))[..., None]
        _paint(img, _aa(0.75 - y, px), np.array([0.45, 0.32, 0.22]))
    elif scene == 1:  # street: blocks of buildings with windows
        blocks = np.floor(x * rng.uniform(3, 5) + rng.uniform()) % 2
        img[:] = np.array([0.55, 0.57, 0.60]) + 0.08 * blocks[..., None]
        win = (np.sin(2 * np.pi * x * 10) > 0.6) & (np.sin(2 * np.pi * y * 8) > 0.6) & (y < 0.7)
        img[win] = np.array([0.35, 0.40, 0.50])
        _paint(img, _aa(0.78 - y, px), np.array([0.30, 0.30, 0.32]))
    elif scene == 2:  # forest: trunks on green
        img[:] = np.array([0.25, 0.55, 0.25])
        img[np.sin(2 * np.pi * (x * rng.uniform(5, 8) + rng.uniform())) > 0.75] = (0.40, 0.28,
                                                                                    0.15)
        _paint(img, _aa(0.80 - y, px), np.array([0.20, 0.40, 0.15]))
    else:  # beach: sky over sand with a wavy shoreline
        img[:] = np.array([0.55, 0.75, 0.95])
        shore = 0.62 + 0.03 * np.sin(2 * np.pi * (x * 3 + rng.uniform()))
        _paint(img, _aa(shore - y, px), np.array([0.92, 0.85, 0.62]))
    img += rng.uniform(-0.05, 0.05, 3).astype(np.float32)
    if landmark:
        tx = rng.uniform(0.1, 0.9)
        tower = np.minimum(_box(x, y, tx, 0.32, 0.035, 0.22), _circle(x, y, tx, 0.08, 0.05))
        _paint(img, _aa(tower, px), np.array([0.15, 0.12, 0.20]))
    for _ in range(int(rng.integers(2, 5))):  # clutter: static furniture-like shapes
        cx, cy, hx, hy = rng.uniform(0, 1), rng.uniform(0.3, 0.9), *rng.uniform(0.03, 0.1, 2)
        _paint(img, _aa(_box(x, y, cx, cy, hx, hy), px), rng.uniform(0.1, 0.9, 3))
    return img


PLACES = 6
"""Prop textures; an action's place is its index in the class list // 4 (novel ones go on)."""
PLACE_CUE = 0.75  # how often a clip shows its own place's prop
MIRROR_Y, LIVE_SCALE = 0.26, 0.42  # v5: the mirror's centre and the live view's scale
_FRAME = np.array([0.25, 0.2, 0.15], np.float32)
_GLASS = np.array([0.72, 0.78, 0.84], np.float32)


def _place(action: str) -> int:
    return (KNOWN_ACTIONS_V3 + NOVEL_ACTIONS_V3).index(action) // 4 % PLACES


def _texture(kind: int, x, y, period: float) -> np.ndarray:
    """One of `PLACES` binary textures of equal mean (half of each colour) and equal period."""
    w = 2 * np.pi / period
    u = {0: y * w, 1: x * w, 2: (x + y) * w / np.sqrt(2), 3: (x - y) * w / np.sqrt(2)}
    if kind in u:
        return (np.sin(u[kind]) > 0).astype(np.float32)
    if kind == 4:
        return ((np.sin(x * w) > 0) ^ (np.sin(y * w) > 0)).astype(np.float32)
    return (np.sin(np.sqrt(x * x + y * y) * w) > 0).astype(np.float32)


def _context(rng, img, x, y, px, action, cx, occluder, bust, live: bool) -> float | None:
    """Generator v4: a textured prop for the action's place on the wall away from the person
    (`cx`), and in half the clips a mirror above it showing `bust` (its head and shoulders);
    painted behind whatever covers `occluder`. With `live` (v5) the mirror is left to the
    caller, who shows the whole person in it: its centre's x is returned."""
    behind = 1.0 - occluder
    side = 1.0 if float(np.mean(cx)) < 0.5 else -1.0
    prop_x = 0.5 + side * rng.uniform(0.30, 0.38)
    place = _place(action)
    if rng.uniform() >= PLACE_CUE:
        place = int((place + rng.integers(1, PLACES)) % PLACES)
    py = rng.uniform(0.55, 0.70)
    c1 = rng.uniform(0.15, 0.95, 3).astype(np.float32)
    c2 = np.clip(c1 + rng.choice([-1.0, 1.0]) * rng.uniform(0.3, 0.5), 0, 1).astype(np.float32)
    outline = _aa(_box(x, y, prop_x, py, 0.11, 0.13), px) * behind
    tex = _texture(place, x - prop_x, y - py, 6 * px)[..., None]
    img[:] = img * (1 - outline[..., None]) + outline[..., None] * (tex * c1 + (1 - tex) * c2)
    if rng.uniform() < 0.5:
        if live:
            return prop_x
        my = rng.uniform(0.18, 0.26)
        glass = _aa(_box(x, y, prop_x, my, 0.10, 0.12), px)
        _paint(img, _aa(_box(x, y, prop_x, my, 0.12, 0.14), px) * behind, _FRAME)
        _paint(img, glass * behind, _GLASS)
        for d, color in bust(prop_x, my + 0.03):
            _paint(img, np.minimum(_aa(d, px), glass) * behind, np.asarray(color, np.float32))
    return None


def render_articulated(rng: np.random.Generator, action: str, frames: int,
                       size: int, version: int = 3) -> SynthClip:
    """Sample a scene, a person doing `action` and the attributes, and render the clip
    (`version`: the generator's, 3, 4 or 5)."""
    context_rng = np.random.default_rng(rng.integers(2**32)) if version >= 4 else None
    mirror = None
    t = np.linspace(0.0, 1.0, frames, dtype=np.float32)
    px = 1.0 / size
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size
    tt = t[:, None, None]
    # the camera pans and shakes: every position below is in scene coordinates
    pan = rng.uniform(-0.12, 0.12, 2) * np.array([1.0, 0.35])
    shake = rng.normal(0, 0.004, (frames, 2))
    ox = (pan[0] * (t - 0.5) + shake[:, 0])[:, None, None]
    oy = (pan[1] * (t - 0.5) + shake[:, 1])[:, None, None]
    x = coords[None, None, :] + ox + 0 * coords[None, :, None]
    y = coords[None, :, None] + oy + 0 * coords[None, None, :]

    from pabench.data.synth.scene import KNOWN_ATTRIBUTES, NOVEL_ATTRIBUTES

    attrs = {a: int(rng.integers(0, 2)) for a in KNOWN_ATTRIBUTES + NOVEL_ATTRIBUTES}
    scene, obj = int(rng.integers(len(SCENES))), int(rng.integers(len(OBJECTS)))
    img = _background(rng, scene, attrs["landmark"], x, y, px)

    skin = _SKIN[attrs["skin_color"]] + rng.uniform(-0.03, 0.03, 3).astype(np.float32)
    hair = _HAIR[attrs["hair_color"]] + rng.uniform(-0.04, 0.04, 3).astype(np.float32)
    shirt = _CLOTHES[rng.integers(len(_CLOTHES))]
    trousers = _CLOTHES[rng.integers(len(_CLOTHES))] * 0.7
    face_frames = np.zeros(frames, np.uint8)
    if attrs["face"]:
        span = int(rng.integers((frames + 1) // 2, frames + 1))
        start = int(rng.integers(0, frames - span + 1))
        face_frames[start : start + span] = 1
    person = np.zeros(x.shape, np.float32)
    face = np.zeros_like(person)

    def figure(cx, fy, s, wf, angles, extra, with_face, long_hair, colors, held, canvas=None):
        torso_c, arm_c, leg_c, skin_c, hair_c = colors
        fy = fy + extra["drop"] * s
        hip_y, neck_y = fy - 0.46 * s, fy - 0.80 * s - extra["shoulders"] * s
        head_y, head_r = fy - 0.90 * s, 0.085 * s
        shapes, hands = [], {}
        if long_hair:
            shapes.append((_box(x, y, cx, head_y + 0.08 * s, 0.11 * s, 0.11 * s), hair_c))
        for side, sgn in (("r", 1.0), ("l", -1.0)):
            hx = cx + sgn * 0.045 * s * wf
            kx, ky = _joint(hx, hip_y, 0.24 * s, angles[f"thigh_{side}"][:, None, None], sgn)
            ax_, ay_ = _joint(kx, ky, 0.22 * s, angles[f"shin_{side}"][:, None, None], sgn)
            shapes.append((_capsule(x, y, hx, hip_y, kx, ky, 0.04 * s), leg_c))
            shapes.append((_capsule(x, y, kx, ky, ax_, ay_, 0.036 * s), leg_c))
        shapes.append((_box(x, y, cx, (hip_y + neck_y) / 2, 0.075 * s * wf,
                            (hip_y - neck_y) / 2 + 0.02 * s), torso_c))
        for side, sgn in (("r", 1.0), ("l", -1.0)):
            sx, sy = cx + sgn * 0.085 * s * wf, neck_y + 0.02 * s
            ex, ey = _joint(sx, sy, 0.17 * s, angles[f"arm_{side}"][:, None, None], sgn)
            wx, wy = _joint(ex, ey, 0.16 * s, angles[f"fore_{side}"][:, None, None], sgn)
            shapes.append((_capsule(x, y, sx, sy, ex, ey, 0.034 * s), arm_c))
            shapes.append((_capsule(x, y, ex, ey, wx, wy, 0.03 * s), skin_c))
            shapes.append((_circle(x, y, wx, wy, 0.04 * s), skin_c))
            hands[side] = (ex, ey, wx, wy)
        shapes.extend(head_shapes(x, y, cx, head_y, head_r, s, skin_c, hair_c, with_face, 0.03,
                                  (0.06, 0.025)))
        head = shapes[-3][0]
        shapes.extend(held(hands, s, fy))
        cover = np.zeros(x.shape, np.float32)
        for d, color in shapes:
            a = _aa(d, px).astype(np.float32)
            _paint(img if canvas is None else canvas, a, np.asarray(color, np.float32))
            np.maximum(cover, a, out=cover)
        return cover, _aa(head - 0.01 * s, px)

    no_extra = {"drop": 0 * tt, "shoulders": 0 * tt}
    if attrs["relationship"]:  # a second person, placed independently, idling
        other = _CLOTHES[rng.integers(len(_CLOTHES))]
        angles2, _ = pose(rng, None, t)
        p2, f2 = figure(rng.uniform(0.12, 0.88), rng.uniform(0.86, 0.92), 0.68, 1.0, angles2,
                        no_extra, False, False, (other, other, other * 0.6, _SKIN[0], _HAIR[0]),
                        lambda *a: [])
        person, face = np.maximum(person, p2), np.maximum(face, f2)

    s = (0.82 if attrs["age"] == 0 else 0.64) * rng.uniform(0.95, 1.05)
    wf = (1.0 if attrs["weight"] == 0 else 1.45) * rng.uniform(0.92, 1.08)
    cx = rng.uniform(0.3, 0.7) + rng.uniform(-0.06, 0.06) * tt
    fy = rng.uniform(0.90, 0.96) + 0 * tt
    angles, extra = pose(rng, action, t)
    visible = face_frames[:, None, None].astype(bool)
    if context_rng is not None:
        body = skin if attrs["nudity"] else shirt

        def bust(mx, my):
            r = 0.085 * s
            hair_box = ([(_box(x, y, mx, my - 0.02 * s, 0.11 * s, 0.11 * s), hair)]
                        if attrs["gender"] else [])
            shoulders = (_box(x, y, mx, my + 0.14 * s, 0.13 * s, 0.06 * s), body)
            return [*hair_box, shoulders, *head_shapes(x, y, mx, my - 0.1 * s, r, s, skin,
                                                        hair, visible, 0.03, (0.06, 0.025))]

        mirror = _context(context_rng, img, x, y, px, action, cx, person, bust, version >= 5)
    extra = {k: (v[:, None, None] if isinstance(v, np.ndarray) else v) for k, v in extra.items()}
    # the object in hand: the action's own, or (the `object` label) one held idle in either hand,
    # so that holding something tells nothing about the action
    held_kind = extra["object"]
    if held_kind is None and obj:
        held_kind = (OBJECTS[obj], "idle", str(rng.choice(["r", "l"])))
    ball_color = rng.uniform(0.2, 1.0, 3).astype(np.float32)
    bounce_phase = rng.uniform()
    release = min(frames - 1, int(np.searchsorted(t, 0.6)))

    def held(hands, s, fy):
        out = []
        if attrs["tattoo"]:  # on the right forearm, so it moves with the arm
            ex, ey, wx, wy = hands["r"]
            mx, my = (ex + wx) / 2, (ey + wy) / 2
            out.append((np.abs(x - mx) + np.abs(y - my) - 0.03 * s, _TATTOO))
        if held_kind is None:
            return out
        kind, mode, arg = held_kind
        ex, ey, wx, wy = hands[arg if mode == "idle" else "r"]
        if kind == "stick":
            dx, dy = wx - ex, wy - ey
            norm = np.sqrt(dx * dx + dy * dy) + 1e-6
            tip_x, tip_y = wx + 0.26 * s * dx / norm, wy + 0.26 * s * dy / norm
            out.append((_capsule(x, y, wx, wy, tip_x, tip_y, 0.02 * s), (0.35, 0.22, 0.10)))
            return out
        if kind == "box":
            out.append((_box(x, y, wx, wy, 0.045 * s, 0.045 * s), (0.6, 0.4, 0.2)))
            return out
        bx, by = wx, wy
        if mode == "release":  # thrown: leaves the hand and flies on
            gone = np.clip(tt - t[release], 0, None)
            bx = np.where(tt > t[release], wx[release] + 1.1 * gone, wx)
            by = np.where(tt > t[release], wy[release] - 0.5 * gone + 1.5 * gone ** 2, wy)
        elif mode == "arrive":  # caught: flies in and stops in the hand
            early = np.clip(arg - tt, 0, None)
            bx, by = wx + 1.1 * early, wy - 0.4 * early
        elif mode == "bounce":  # dribbled: down to the floor and back
            up = 2 * np.abs(((tt * arg + bounce_phase) % 1.0) - 0.5)
            by = wy + (fy - wy) * (1 - up)
        out.append((_circle(x, y, bx, by, 0.05 * s), ball_color))
        return out

    colors = (skin if attrs["nudity"] else shirt, skin if attrs["nudity"] else shirt,
              skin if attrs["nudity"] else trousers, skin, hair)
    if version >= 5 and mirror is not None:  # the person seen again, live, outside the box
        behind = 1.0 - person
        glass = _aa(_box(x, y, mirror, MIRROR_Y, 0.14, 0.18), px) * behind
        _paint(img, _aa(_box(x, y, mirror, MIRROR_Y, 0.16, 0.2), px) * behind, _FRAME)
        _paint(img, glass, _GLASS)
        view = img.copy()
        figure(mirror + LIVE_SCALE * (cx - np.mean(cx)), MIRROR_Y + 0.17 + 0 * tt,
               LIVE_SCALE * s, wf, angles, extra, visible, attrs["gender"], colors, held, view)
        img[:] = img * (1 - glass[..., None]) + view * glass[..., None]
    p1, f1 = figure(cx, fy, s, wf, angles, extra, visible, attrs["gender"], colors, held)
    person, face = np.maximum(person, p1), np.maximum(face, f1)
    if rng.uniform() < 0.5:  # a passing ball, unrelated to the action
        sx, sy, vx, vy = rng.uniform(0, 1), rng.uniform(0.2, 0.8), *rng.uniform(-0.5, 0.5, 2)
        _paint(img, _aa(_circle(x, y, sx + vx * tt, sy + vy * tt, 0.035), px),
               rng.uniform(0.2, 1.0, 3).astype(np.float32))
    img += rng.normal(0, 0.02, img.shape).astype(np.float32)  # sensor noise, fresh each frame
    video = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
    return SynthClip(
        video=video, person_mask=(person > 0.5).astype(np.uint8),
        face_mask=(face > 0.5).astype(np.uint8), action=action, attributes=attrs,
        face_frames=face_frames, scene=SCENES[scene], object=OBJECTS[obj],
    )
