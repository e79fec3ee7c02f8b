"""pa-synth, the embedded synthetic benchmark: the scene renderer (`scene`) and the presets,
datasets and builder (`build`)."""

from pabench.data.synth.build import (
    GENERATOR_VERSION,
    NEWEST_GENERATOR,
    PRESETS,
    PUBLIC_TEST_SEED,
    SYNTH_CARD,
    SYNTH_DATASETS,
    Preset,
    SynthDatasetSpec,
    TestSeed,
    build_synth,
    clip_rng,
    dataset_spec,
    get_preset,
    render_dataset_clip,
    resolve_preset,
)
from pabench.data.synth.scene import (
    FLAT_VERSION,
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
    "FLAT_VERSION", "NEWEST_GENERATOR",
    "GENERATOR_VERSION", "KNOWN_ACTIONS", "KNOWN_ATTRIBUTES", "NOVEL_ACTIONS",
    "NOVEL_ATTRIBUTES", "OBJECTS", "PRESETS", "PUBLIC_TEST_SEED", "SCENES", "SYNTH_CARD",
    "SYNTH_DATASETS", "Preset", "SynthClip", "SynthDatasetSpec", "TestSeed", "build_synth",
    "clip_rng", "dataset_spec", "decode_masks", "encode_masks", "get_preset", "render_clip",
    "render_dataset_clip", "resolve_preset",
]
