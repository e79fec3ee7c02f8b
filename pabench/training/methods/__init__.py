"""Training of the learned anonymizer baselines: SPAct and penalty-driven SPAct
(self-supervised, `spact`), VITA with its three minimax solvers (`vita`) and MPPAR
(supervised, `mppar`); their recipes in `recipes`, what they share in `base`, the run loop in
`run`.

All start as the papers do: the U-Net f_A is pretrained to the identity by L1 reconstruction,
then the utility model f_T (action classes) and the privacy side f_B are trained on its output.
The minimax phase then alternates an f_A update against frozen f_T/f_B with updates of f_T/f_B
on the current f_A output.

Where the papers loop "until accuracy reaches a threshold", each iteration here takes a fixed
number of updates, so a recipe has a known cost. The clips (`pabench.training.pools`) are
rendered from a pa-synth seed namespace of their own with known actions only, so no benchmark
split is ever seen, or come from two built real datasets (action and privacy, the papers'
UCF101 + VISPR1 setting); the held-out clips of the curves come from the same namespace.
"""

from pabench.training.methods.base import TrainResult, pretrain_identity
from pabench.training.methods.recipes import (
    METHODS,
    RECIPES,
    TRAINING_ATTACKERS,
    AnyRecipe,
    MPPARRecipe,
    PenaltyRecipe,
    Recipe,
    SPActRecipe,
    VitaGRLRecipe,
    VitaKBeamRecipe,
    VitaRecipe,
    default_recipe,
    load_recipe,
)
from pabench.training.methods.run import (
    PHASES,
    AnonymizerAmp,
    Log,
    anonymizer_autocast,
    train_anonymizer,
)

__all__ = [
    "METHODS", "PHASES", "RECIPES", "TRAINING_ATTACKERS", "AnonymizerAmp", "AnyRecipe", "Log",
    "MPPARRecipe", "PenaltyRecipe", "Recipe", "SPActRecipe", "TrainResult", "VitaGRLRecipe",
    "VitaKBeamRecipe", "VitaRecipe", "anonymizer_autocast", "default_recipe", "load_recipe",
    "pretrain_identity", "train_anonymizer",
]
