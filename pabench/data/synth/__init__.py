"""pa-synth, the embedded synthetic benchmark: the scene renderer (`scene`) and the presets,
datasets and builder (`build`)."""

from pabench.data.synth.build import (
    PRESETS,
    PUBLIC_TEST_SEED,
    SYNTH_CARD,
    SYNTH_DATASETS,
    Preset,
    SynthDatasetSpec,
    TestSeed,
    build_synth,
    clip_rng,
    get_preset,
    render_dataset_clip,
    resolve_preset,
)
from pabench.data.synth.scene import (
    GENERATOR_VERSION,
    KNOWN_ACTIONS,
    KNOWN_ATTRIBUTES,
    NOVEL_ACTIONS,
    NOVEL_ATTRIBUTES,
    OBJECTS,
    SCENES,
    SynthClip,
    decode_masks,
    encode_masks,
    render_clip,
)

__all__ = [
    "GENERATOR_VERSION", "KNOWN_ACTIONS", "KNOWN_ATTRIBUTES", "NOVEL_ACTIONS",
    "NOVEL_ATTRIBUTES", "OBJECTS", "PRESETS", "PUBLIC_TEST_SEED", "SCENES", "SYNTH_CARD",
    "SYNTH_DATASETS", "Preset", "SynthClip", "SynthDatasetSpec", "TestSeed", "build_synth",
    "clip_rng", "decode_masks", "encode_masks", "get_preset", "render_clip",
    "render_dataset_clip", "resolve_preset",
]
