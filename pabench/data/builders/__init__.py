"""Builders for real datasets; each module registers its DatasetSpec on import."""
