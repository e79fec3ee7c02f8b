"""Reference baselines from the papers: downsampling and obfuscation (registered on import)."""
