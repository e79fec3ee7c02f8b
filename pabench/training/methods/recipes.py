"""The recipes of the learned baselines: one pydantic model per method, validated and frozen,
told apart by `method`. A recipe's JSON dump is hashed into its cache key, its export's name and
the recipe its records name, so a field's name, order or default moves all three.
`default_recipe` gives the leaderboard's pa-synth settings or the papers' real-data ones;
`load_recipe` reads a file over them and checks its model names before any training."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)

from pabench.anonymizers.learned import GROUPS
from pabench.errors import PabenchError, unknown_name
from pabench.io import read_json, validation_error
from pabench.models import MODELS
from pabench.training.attackers import TRAINING_ONLY

METHODS = ("spact", "penalty", "vita", "vita-grl", "vita-kbeam", "mppar")
TRAINING_ATTACKERS = TRAINING_ONLY  # disjoint from every protocol's attackers


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

    @model_serializer(mode="wrap")
    def _without_unset_selection(self, handler: SerializerFunctionWrapHandler) -> dict:
        """A recipe without selection dumps as before the field existed, so its digest, its
        cache and the recipes its records name stay what they were."""
        data = handler(self)
        if self.select_every is None:
            data.pop("select_every", None)
        return data


class SPActRecipe(_Recipe):
    method: Literal["spact"] = "spact"
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


_REAL_EPOCH = 537  # steps per epoch: UCF101 split-1 train (9,537 videos) less a tenth, batch 16


def _real_settings(method: str) -> dict:
    """UCF101 + VISPR1 training as in SPAct's supplement (C.2-C.4): R3D-18 f_T, ResNet-50
    NT-Xent f_B, Adam at 1e-3, f_A pretrained 100 epochs, f_T 150, f_B 400, minimax 100
    epochs; VITA's gamma 0.5 and th_B 0.99 (its UCF101 setting, for all three solvers);
    MPPAR's alpha 5e-4, beta 1e-4 and T2 95% (its supplement's attacker threshold, as th_B).
    Ours: the U-Net width, and the VITA family's attacker ensemble (ResNet-34 +
    MobileNet-V3-Large, disjoint from every real protocol's attackers), retrained from scratch
    every 10 epochs."""
    epoch = _REAL_EPOCH
    common = dict(batch=16, width=32, identity_steps=100 * epoch, identity_batch=16,
                  identity_lr=1e-3, target="r3d_18", target_steps=150 * epoch, target_lr=1e-3,
                  steps=100 * epoch, anonymizer_lr=1e-3)
    if method in ("spact", "penalty"):
        return common | dict(ssl_model="resnet50", ssl_hidden=2048, ssl_dim=128,
                             ssl_steps=400 * epoch, ssl_lr=1e-3, temperature=0.1)
    ensemble = ["resnet34", "mobilenet_v3_large"]
    vita = common | dict(budget_models=ensemble * (2 if method == "vita-kbeam" else 1),
                         budget_frames=4, budget_clips=1024, budget_steps=4 * epoch,
                         budget_lr=1e-3, restart_every=10 * epoch)
    if method == "mppar":
        return vita | dict(restart_every=100 * epoch + 1, anonymizer_lr=1e-4, inner_lr=5e-4,
                           budget_threshold=0.95)
    # VITA's UCF101 + VISPR experiment (its Sec. 4.2.2): gamma 0.5 and th_B 99% for each solver
    return vita | dict(gamma=0.5, budget_threshold=0.99)


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
