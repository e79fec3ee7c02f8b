"""The recipes of the learned baselines: one pydantic model per method, validated and frozen,
told apart by `method`. A recipe's JSON dump is hashed into its cache key, its export's name and
the recipe its records name, so a field's name, order or default moves all three.
`default_recipe` gives the leaderboard's pa-synth settings or the papers' real-data ones;
`load_recipe` reads a file over them and checks its model names before any training."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
    model_validator,
)

from pabench.anonymizers.learned import GROUPS
from pabench.errors import PabenchError, unknown_name
from pabench.io import read_json, validation_error
from pabench.models import MODELS
from pabench.training.attackers import TRAINING_ONLY

METHODS = ("spact", "penalty", "vita", "vita-grl", "vita-kbeam", "mppar")
TRAINING_ATTACKERS = TRAINING_ONLY  # disjoint from every protocol's attackers
# MPPAR's f_train^P (supplement, "The list of training/testing attributes and attack models"):
# 8 MobileNet-V2 width multipliers, 1.0 left out as a ranked real protocol's attacker
MPPAR_ATTACKERS = tuple(f"mobilenet_v2_x{w}" for w in ("0_35", "0_5", "0_6", "0_75", "0_85",
                                                      "1_1", "1_3", "1_4"))
EPOCH_FIELDS = ("identity_steps", "target_steps", "ssl_steps", "steps", "budget_steps",
                "restart_every")  # the step counts `in_epochs` may name
_LATER = {"select_every": None, "in_epochs": (), "ssl_views": "frames"}  # dumped only when set


class _Recipe(BaseModel):
    """Settings shared by every method. Defaults are the leaderboard settings for pa-synth
    (`baselines/*.json` holds the same values); sized so that a tiny-preset run takes about
    five minutes on one CPU thread."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    clips: int = Field(1024, ge=8, description="pa-synth: training clips rendered (known "
                                               "actions); real data trains on its train split")
    batch: int = Field(16, ge=2, description="clips per step, summed over DDP ranks")
    width: int = Field(16, ge=GROUPS, multiple_of=GROUPS, description="U-Net width of f_A")
    identity_steps: int = Field(600, ge=1, description="max L1 reconstruction steps for f_A")
    identity_batch: int = Field(4, ge=1, description="clips per reconstruction step: the loss "
                                                     "is per pixel, so few clips suffice")
    identity_l1: float = Field(0.04, gt=0, description="stop reconstruction once the mean "
                                                        "absolute error per value is below")
    identity_lr: float = 3e-3
    target: str = "tiny3d"
    target_steps: int = Field(150, ge=0, description="f_T pretraining steps on f_A's output")
    target_lr: float = 2e-3
    steps: int = Field(300, ge=0, description="minimax iterations")
    anonymizer_lr: float = 1e-3
    select_every: int | None = Field(
        None, ge=1, description="pa-synth: keep f_A every N minimax iterations and at the end, "
        "and export the one fresh held-out attackers find most private among those keeping "
        "action (`pabench.training.held_out.select_snapshot`); none: the last")
    in_epochs: tuple[str, ...] = Field(
        (), description="step counts given in epochs of the training data, as the papers "
        "state them (`in_steps`): a dataset's epochs, whatever its size")

    @model_validator(mode="after")
    def _epoch_fields_exist(self) -> _Recipe:
        counts = [k for k in EPOCH_FIELDS if k in type(self).model_fields]
        for name in self.in_epochs:
            if name not in counts:
                raise ValueError(f"in_epochs: '{name}' is not one of this recipe's step counts "
                                 f"({', '.join(counts)})")
        return self

    @model_serializer(mode="wrap")
    def _without_later_defaults(self, handler: SerializerFunctionWrapHandler) -> dict:
        """Fields added after the pa-synth recipes were published dump only when set, so those
        recipes' digests, caches and the recipes their records name stay what they were."""
        data = handler(self)
        for name, default in _LATER.items():
            if getattr(self, name, default) == default:
                data.pop(name, None)
        return data

    def in_steps(self, action: int, privacy: int) -> Any:
        """This recipe with its `in_epochs` counts turned into steps, for `action` action
        clips and `privacy` privacy clips: an epoch is a pass over the clips a stage draws
        from, in batches of its size (the privacy side's over the privacy clips)."""
        if not self.in_epochs:
            return self
        update = {}
        for name in self.in_epochs:
            side = name == "budget_steps" or (name == "ssl_steps"
                                              and getattr(self, "ssl_views", "") == "simclr")
            clips = privacy if side else action
            batch = self.identity_batch if name == "identity_steps" else self.batch
            update[name] = getattr(self, name) * math.ceil(clips / batch)
        return self.model_copy(update={**update, "in_epochs": ()})


class SPActRecipe(_Recipe):
    method: Literal["spact"] = "spact"
    ssl_views: Literal["frames", "simclr"] = Field(
        "frames", description="what f_B's NT-Xent compares: two frames of an action clip "
        "(pa-synth), or two SimCLR-augmented views of a privacy-dataset frame (SPAct's "
        "VISPR branch, supplement C.2; `pabench.training.augment.simclr`)")
    ssl_model: str = Field(TRAINING_ATTACKERS[0],
                           description="2D backbone of the privacy branch f_B")
    ssl_hidden: int = Field(128, ge=1, description="backbone output = projection head input")
    ssl_dim: int = Field(128, ge=1, description="projection size the NT-Xent loss sees")
    ssl_steps: int = Field(150, ge=0, description="f_B pretraining steps on f_A's output")
    ssl_lr: float = 2e-3
    temperature: float = Field(0.1, gt=0)
    # 0.25, inside SPAct's (0, 1) range: chosen on held-out clips of the training namespace
    # (docs/baselines.md), where 1.0 fell below the held-out top-1 bar in two of three seeds
    omega: float = Field(0.25, gt=0, description="weight of -NT-Xent in f_A's loss")

    def attackers(self) -> tuple[str, ...]:
        """The privacy-side architectures f_A is trained against (declared in the sidecar)."""
        return (self.ssl_model,)


class PenaltyRecipe(SPActRecipe):
    method: Literal["penalty"] = "penalty"  # type: ignore[assignment]
    omega: float = Field(1.0, gt=0, description="weight of -NT-Xent in f_A's loss (1.0 kept "
                                                "over 0.25 on held-out clips, three seeds)")
    penalty_weight: float = Field(1.0, ge=0, description="lambda: weight of the penalty")
    penalty_bound: float = Field(0.3, gt=0, description="B: the RMS change of an action clip "
                                                        "beyond which f_A is penalised")


class VitaRecipe(_Recipe):
    method: Literal["vita"] = "vita"
    steps: int = Field(200, ge=0, description="minimax iterations (each costs about two "
                                              "SPAct iterations)")
    budget_models: tuple[str, ...] = Field(TRAINING_ATTACKERS, min_length=1,
                                           description="the attacker ensemble (frame models); "
                                                       "for K-Beam, one entry per beam")
    budget_frames: int = Field(4, ge=1, description="frames per clip an attacker averages")
    budget_clips: int = Field(256, ge=1, description="clips anonymized once per (re)start "
                                                     "for the attackers to train on")
    budget_steps: int = Field(500, ge=0, description="attacker training steps at the start "
                                                     "and after each restart")
    budget_lr: float = 2e-3
    gamma: float = Field(2.0, gt=0, description="weight of the privacy term in f_A's loss")
    restart_every: int = Field(200, ge=1, description="re-initialise the attackers every N "
                               "minimax iterations (200, no restart in 200 steps, beat 100 in "
                               "every seed on held-out clips: docs/baselines.md)")
    # th_B: with one step per iteration the attackers sat at chance on f_A's current output;
    # 0.95 (the paper's multi-label value) won on held-out clips for vita and vita-kbeam, and as
    # MPPAR's T2 for mppar (docs/baselines.md)
    budget_threshold: float | None = Field(
        0.95, gt=0, le=1, description="th_B of VITA's algorithms: every iteration an attacker "
        "keeps stepping, on fresh privacy batches, while its element-wise accuracy on the "
        "batch is at most this; none: one step")
    budget_max_steps: int = Field(10, ge=1, description="cap on those steps per iteration "
                                                        "(with budget_threshold)")

    def attackers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.budget_models))


class VitaGRLRecipe(VitaRecipe):
    method: Literal["vita-grl"] = "vita-grl"  # type: ignore[assignment]
    steps: int = Field(600, ge=0, description="minimax iterations (600 beat 200 in every "
                                              "seed on held-out clips: docs/baselines.md)")
    gamma: float = Field(0.5, gt=0, description="weight of -L_B in f_A's loss (2.0 was not "
                         "more private at every seed on held-out clips: docs/baselines.md)")
    restart_every: int = Field(100, ge=1, description="re-initialise the attackers every N "
                               "minimax iterations (VITA's; 300 was not more private at every "
                               "seed on held-out clips: docs/baselines.md)")
    budget_threshold: float | None = Field(None, gt=0, le=1, description="th_B (none: one "
                                           "attacker step per iteration; 0.95 was not more "
                                           "private at every seed on held-out clips: "
                                           "docs/baselines.md)")


class VitaKBeamRecipe(VitaRecipe):
    method: Literal["vita-kbeam"] = "vita-kbeam"  # type: ignore[assignment]
    steps: int = Field(600, ge=0, description="minimax iterations (600 beat 200 in every "
                                              "seed on held-out clips: docs/baselines.md)")
    budget_models: tuple[str, ...] = Field(TRAINING_ATTACKERS * 2, min_length=1,
                                           description="one frame model per beam (K entries)")
    gamma: float = Field(0.5, gt=0, description="weight of L_B in f_A's ascent step")
    restart_every: int = Field(300, ge=1, description="re-initialise the beams every N "
                               "iterations (300 beat 100 in every seed on held-out clips: "
                               "docs/baselines.md)")
    ascent_steps: int = Field(1, ge=1, description="d_iter of the paper's Algorithm 2: f_A "
                              "ascent steps per iteration against the beam picked at its "
                              "first, each on a fresh privacy batch")


class MPPARRecipe(VitaRecipe):
    """MPPAR (Peng et al., NeurIPS 2023): the VITA-style attacker set f_train^P, and f_A
    updated only by the meta step over attribute- and model-different support/query sets."""

    method: Literal["mppar"] = "mppar"  # type: ignore[assignment]
    steps: int = Field(900, ge=0, description="minimax iterations (attribute and model "
                                              "splits alternate; 600 beat 200, then with T2 "
                                              "900 beat 600, in every seed on held-out clips: "
                                              "docs/baselines.md)")
    budget_models: tuple[str, ...] = Field(TRAINING_ATTACKERS, min_length=2,
                                           description="f_train^P, split 60/40 each epoch")
    gamma: float = Field(0.5, gt=0, description="weight of -L_B in the loss L")
    anonymizer_lr: float = Field(1e-3, gt=0, description="beta: Adam learning rate of the "
                                 "meta (outer) update; the paper's 1e-4, kept for real data "
                                 "and its 100 epochs, gained no held-out privacy in pa-synth's "
                                 "200 steps")
    inner_lr: float = Field(5e-4, gt=0, description="alpha: the virtual training step")
    support_share: float = Field(0.6, gt=0, lt=1, description="share of the attributes, "
                                 "mixed clips and attack models on the support side")
    first_order: bool = Field(False, description="drop the second-order term of the meta "
                                                 "gradient (cheaper)")
    restart_every: int = Field(1000, ge=1, description="MPPAR does not restart: beyond steps")
    budget_threshold: float | None = Field(0.95, gt=0, le=1, description="T2 of MPPAR's "
                                           "Algorithm 1: every attack model keeps stepping "
                                           "while its accuracy is at most this (none: one "
                                           "step; 0.95 was more private at every seed on "
                                           "held-out clips: docs/baselines.md)")


AnyRecipe = (SPActRecipe | PenaltyRecipe | VitaRecipe | VitaGRLRecipe | VitaKBeamRecipe
             | MPPARRecipe)
Recipe = Annotated[AnyRecipe, Field(discriminator="method")]
RECIPES: dict[str, type[_Recipe]] = {
    "spact": SPActRecipe, "penalty": PenaltyRecipe, "vita": VitaRecipe,
    "vita-grl": VitaGRLRecipe, "vita-kbeam": VitaKBeamRecipe, "mppar": MPPARRecipe,
}


def default_recipe(method: str, real: bool = False) -> AnyRecipe:
    """The leaderboard recipe for pa-synth, or with `real` the papers' settings for real data
    (`baselines/real/NAME.json` holds the same values)."""
    if method not in RECIPES:
        raise unknown_name("learned baseline", method, RECIPES)
    return RECIPES[method](**(_real_settings(method) if real else {}))  # type: ignore[return-value]


def _real_settings(method: str) -> dict:
    """The papers' settings for real data, each with its source in docs/baselines.md
    ("Real-data recipes"). Schedules count what the papers count: SPAct's supplement (C.4)
    and the penalty paper (Sec. 4.2) give epochs, which `in_epochs` keeps epochs of whichever
    dataset trains (HMDB51's are a third of UCF101's steps); VITA (Sec. 4.2.2) gives
    iterations. VITA's three step sizes are its own (alpha_A 1e-4, alpha_T 1e-5, alpha_B
    1e-2); MPPAR trains 8 attack models of the MobileNet-V2 family (supplement). Ours: the
    U-Net width, and attack models disjoint from every ranked real protocol's attackers."""
    common: dict = dict(batch=16, width=32, identity_steps=100, identity_batch=16,
                        identity_lr=1e-3, target="r3d_18", target_steps=150, target_lr=1e-3,
                        steps=100, anonymizer_lr=1e-3,
                        in_epochs=("identity_steps", "target_steps", "steps"))
    if method in ("spact", "penalty"):
        ssl = common | dict(ssl_views="simclr", ssl_model="resnet50", ssl_hidden=2048,
                            ssl_dim=128, ssl_steps=400, ssl_lr=1e-3, temperature=0.1,
                            in_epochs=(*common["in_epochs"], "ssl_steps"))
        # the penalty paper's anonymizer batch (Sec. 4.2) and B = 0.3 (Table 1)
        return ssl | (dict(batch=8, penalty_bound=0.3) if method == "penalty" else {})
    vita = common | dict(budget_frames=4, budget_clips=1024, budget_steps=2148, budget_lr=1e-3,
                         gamma=0.5)
    if method == "mppar":
        return vita | dict(budget_models=MPPAR_ATTACKERS, restart_every=101, anonymizer_lr=1e-4,
                           inner_lr=5e-4, budget_threshold=0.95,
                           in_epochs=(*common["in_epochs"], "restart_every"))
    # VITA's UCF101 + VISPR experiment (Sec. 4.2.2): 800 iterations, restarts every 100, its
    # step sizes, gamma 0.5 and th_B 99% for each solver
    ensemble = ["resnet34", "mobilenet_v3_large"]
    return vita | dict(budget_models=ensemble * (2 if method == "vita-kbeam" else 1),
                       steps=800, restart_every=100, anonymizer_lr=1e-4, target_lr=1e-5,
                       budget_lr=1e-2, budget_threshold=0.99,
                       in_epochs=("identity_steps", "target_steps"))


def load_recipe(path: Path, method: str, real: bool = False) -> AnyRecipe:
    """Read a recipe file for `method`: its values over the defaults of pa-synth (or with
    `real` of real data). Any problem is one line naming the file."""
    if method not in RECIPES:
        raise unknown_name("learned baseline", method, RECIPES)
    data = read_json(path, f"recipe {path}")
    if isinstance(data, dict):
        data = {"method": method, **(_real_settings(method) if real else {}), **data}
    try:
        recipe = TypeAdapter(Recipe).validate_python(data)
    except ValidationError as e:
        raise validation_error(f"recipe {path}", e, skip=1) from None
    if recipe.method != method:
        raise PabenchError(f"recipe {path}: is a '{recipe.method}' recipe, not '{method}'")
    if real and recipe.select_every is not None:
        raise PabenchError(f"recipe {path}: select_every probes pa-synth's held-out clips; a "
                           "real-data training cannot select (remove it)")
    _check_models(path, recipe)
    return recipe


def _check_models(source: Path | str, recipe: AnyRecipe) -> None:
    """Model names must exist with the right kind: a typo fails before minutes of training."""
    wanted = [("target", recipe.target, "video")]
    if isinstance(recipe, SPActRecipe):
        wanted.append(("ssl_model", recipe.ssl_model, "frame"))
    else:
        wanted += [("budget_models", m, "frame") for m in recipe.budget_models]
    for key, name, kind in wanted:
        if name not in MODELS:
            raise PabenchError(f"recipe {source}: {key}: {unknown_name('model', name, MODELS)}")
        if MODELS.get(name).kind != kind:
            raise PabenchError(f"recipe {source}: {key}: model '{name}' is a "
                               f"{MODELS.get(name).kind} model, expected a {kind} model")
