"""The actions of pa-synth generator v3 as joint-angle trajectories (`pose`): which limbs an
action moves and how, every other limb holding a random pose with a slow wobble."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Angles = dict[str, np.ndarray]  # joint -> absolute limb angle per frame, radians
# Limb angles are absolute and mirrored per side: 0 hangs straight down, pi/2 points away from
# the body horizontally, pi straight up, negative values point across the body.
_LIMBS = ("arm_r", "fore_r", "arm_l", "fore_l", "thigh_r", "shin_r", "thigh_l", "shin_l")


def _f(u: np.ndarray, cycles: float = 1.0) -> np.ndarray:
    """0 -> 1 -> 0 over each cycle, smooth."""
    return 0.5 - 0.5 * np.cos(2 * np.pi * cycles * u)


def _s(u: np.ndarray, cycles: float = 1.0) -> np.ndarray:
    return np.sin(2 * np.pi * cycles * u)


def _one_arm(side: str, upper: np.ndarray, fore: np.ndarray) -> Angles:
    return {f"arm_{side}": upper, f"fore_{side}": fore}


def _both_arms(upper: np.ndarray, fore: np.ndarray) -> Angles:
    return {**_one_arm("r", upper, fore), **_one_arm("l", upper, fore)}


def _wave(u, r):
    return 2.6 + 0.1 * _s(u), 2.6 + 0.6 * _s(u, 2)


def _raise(u, r):
    up = np.clip(r, 0, 1)
    return 0.2 + 2.5 * up, 0.1 + 2.5 * up


def _punch(u, r):
    a = 1.5 + 0.1 * _s(u)
    return a, a - 1.7 * (1 - _f(u, 1.5))


def _to_face(u, r):
    f = _f(u)
    return 0.35 - 0.25 * f, 0.2 - 2.9 * f


def _circle_arm(u, r):
    a = 2 * np.pi * u
    return a, a


def _kick(u, r):
    f = _f(u) ** 2
    return {"thigh": 0.1 + 1.2 * f, "shin": 0.05 + 1.0 * f}


def _sided(fn: Callable, side: str, legs: bool = False) -> Callable[..., Angles]:
    def angles(u, r):
        out = fn(u, r)
        if legs:
            return {f"thigh_{side}": out["thigh"], f"shin_{side}": out["shin"]}
        return _one_arm(side, *out)
    return angles


def _march(u, r):
    up_r, up_l = np.maximum(_s(u), 0), np.maximum(-_s(u), 0)
    return {"thigh_r": 1.1 * up_r, "shin_r": 0.05 + 0 * u, "thigh_l": 1.1 * up_l,
            "shin_l": 0.05 + 0 * u}


def _squat(u, r):
    f = _f(u)
    legs = {"thigh_r": 0.9 * f, "shin_r": -0.4 * f, "thigh_l": 0.9 * f, "shin_l": -0.4 * f}
    return {**legs, **_both_arms(0.3 + 1.1 * f, 0.3 + 1.1 * f), "drop": 0.14 * f}


def _lunge(u, r):
    f = _f(u)
    return {"thigh_r": 0.1 + 0.9 * f, "shin_r": 0.1 + 0 * f, "thigh_l": 0.1 + 0.3 * f,
            "shin_l": -0.2 * f, "drop": 0.08 * f}


def _clap(u, r):
    f = _f(u, 2)
    return _both_arms(0.5 + 0 * u, -0.9 - 0.7 * f)


def _jacks(u, r):
    f = _f(u)
    return _both_arms(0.3 + 2.5 * f, 0.3 + 2.5 * f)


def _flap(u, r):
    a = 1.6 + 0.5 * _s(u, 2)
    return _both_arms(a, a + 0.3 * _s(u, 2))


def _hug(u, r):
    f = _f(u)
    return _both_arms(0.4 + 0.3 * f, -0.3 - 1.3 * f)


def _head(u, r):
    f = _f(u)
    a = 0.3 + 2.0 * f
    return _both_arms(a, a + 1.6 * f)


def _throw(u, r):
    # wind up overhead, swing down and forward; the ball leaves the hand at 60% of the swing
    a = 2.6 - 2.0 * np.clip(r, 0, 1)
    return {**_one_arm("r", a, a - 0.3), "object": ("ball", "release", 0.6)}


def _catch(u, r):
    a = 0.3 + 1.1 * np.clip(r, 0, 1)
    return {**_one_arm("r", a, a + 0.2), "object": ("ball", "arrive", 0.7)}


def _bounce(u, r):
    return {**_one_arm("r", 0.6 + 0 * u, 0.3 + 0.4 * _f(u, 2)), "object": ("ball", "bounce", 2)}


def _swing(u, r):
    a = 1.5 + 1.2 * _s(u)
    return {**_one_arm("r", a, a), "object": ("stick", "held", 0)}


def _shrug(u, r):
    return {**_both_arms(0.3 + 0 * u, -0.4 + 0 * u), "shoulders": 0.05 * _f(u, 2)}


def _salute(u, r):
    f = np.clip(2 * r, 0, 1)
    return 0.3 + 1.9 * f, 0.3 + 3.3 * f


def _scratch(u, r):
    return 2.3 + 0 * u, 3.7 + 0.35 * _s(u, 3)


def _boxing(u, r):
    right, left = 1 - _f(u), _f(u)
    return {**_one_arm("r", 1.5 + 0 * u, -0.2 + 1.7 * right),
            **_one_arm("l", 1.5 + 0 * u, -0.2 + 1.7 * left)}


def _row(u, r):
    f = _f(u)
    return _both_arms(1.3 + 0 * u, 1.3 - 1.5 * f)


def _swing_arms(u, r):
    return {**_one_arm("r", 0.7 * _s(u), 0.7 * _s(u)), **_one_arm("l", -0.7 * _s(u), -0.7 * _s(u))}


def _knee_up(u, r):
    f = np.clip(2 * r, 0, 1)
    return {"thigh": 1.2 * f, "shin": 0.05 + 0 * f}


def _pick_up(u, r):
    f = _f(u)
    legs = {"thigh_r": 0.9 * f, "shin_r": -0.4 * f, "thigh_l": 0.9 * f, "shin_l": -0.4 * f}
    return {**legs, **_one_arm("r", 0.2 - 0.1 * f, 0.2 - 0.6 * f), "drop": 0.18 * f}


def _rub(u, r):
    return _both_arms(0.4 + 0 * u, -1.3 + 0.25 * _s(u, 3))


# action -> its limbs' angles as a function of the phase u (cycles) and the ramp r (0 -> 1 once)
_ACTIONS: dict[str, Callable[..., Angles]] = {
    "wave_r": _sided(_wave, "r"), "wave_l": _sided(_wave, "l"),
    "raise_r": _sided(_raise, "r"), "raise_l": _sided(_raise, "l"),
    "punch_r": _sided(_punch, "r"), "punch_l": _sided(_punch, "l"),
    "hand_to_face_r": _sided(_to_face, "r"),
    "hand_to_face_l": _sided(_to_face, "l"),
    "circle_arm_r": _sided(_circle_arm, "r"),
    "circle_arm_l": _sided(_circle_arm, "l"),
    "clap": _clap, "jumping_jack_arms": _jacks, "flap": _flap,
    "hug": _hug, "hands_on_head": _head,
    "kick_r": _sided(_kick, "r", legs=True),
    "kick_l": _sided(_kick, "l", legs=True),
    "march": _march, "squat": _squat, "lunge": _lunge,
    "throw": _throw, "catch": _catch, "bounce_ball": _bounce,
    "swing_stick": _swing,
    # novel actions: never seen in the known datasets
    "shrug": _shrug, "salute_r": _sided(_salute, "r"),
    "salute_l": _sided(_salute, "l"), "scratch_head_r": _sided(_scratch, "r"),
    "scratch_head_l": _sided(_scratch, "l"), "box": _boxing, "row": _row,
    "swing_arms": _swing_arms,
    "knee_up_r": _sided(_knee_up, "r", legs=True),
    "knee_up_l": _sided(_knee_up, "l", legs=True),
    "pick_up": _pick_up, "rub_hands": _rub,
}
KNOWN_ACTIONS_V3 = tuple(list(_ACTIONS)[:24])
NOVEL_ACTIONS_V3 = tuple(list(_ACTIONS)[24:])


def _idle(rng: np.random.Generator, limb: str, t: np.ndarray) -> np.ndarray:
    """A limb the action does not use: a random pose held with a slow wobble."""
    wobble = 0.08 * np.sin(2 * np.pi * (rng.uniform(0.2, 0.6) * t + rng.uniform()))
    if limb.startswith("arm"):
        return rng.uniform(-0.3, 2.8) + wobble
    if limb.startswith("fore"):
        return rng.uniform(-1.2, 0.6) + wobble  # relative to the upper arm, added below
    if limb.startswith("thigh"):
        return rng.uniform(0.0, 0.35) + wobble
    return rng.uniform(-0.2, 0.2) + wobble


def pose(rng: np.random.Generator, action: str | None, t: np.ndarray) -> tuple[Angles, dict]:
    """Every limb's angle per frame, plus extras (body drop, shoulder lift, held object)."""
    angles: Angles = {}
    extra: dict = {"drop": 0 * t, "shoulders": 0 * t, "object": None}
    if action is not None:
        fn = _ACTIONS[action]
        phase, speed = rng.uniform(), rng.uniform(0.8, 1.2)
        start = rng.uniform(-0.2, 0.2)
        u, r = phase + speed * t, (t - start) * rng.uniform(0.9, 1.3)
        gain = rng.uniform(0.85, 1.15)
        for k, v in fn(u, r).items():
            if k in extra:
                extra[k] = v if k == "object" else v * gain
            else:
                rest = {"arm": 0.25, "fore": 0.15, "thigh": 0.08, "shin": 0.05}[k.split("_")[0]]
                angles[k] = rest + (np.asarray(v) - rest) * gain
    for limb in _LIMBS:
        if limb not in angles:
            angles[limb] = _idle(rng, limb, t)
            if limb.startswith("fore"):
                angles[limb] = angles[limb] + angles["arm" + limb[4:]]
    return angles, extra
