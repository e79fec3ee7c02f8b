"""Datasets: the pa-synth generator, real builders, the Hub folder layout and the loader."""
