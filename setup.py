"""Packages pabench with the official leaderboard: the repository's `leaderboard/` folder is
installed as `pabench/official/` (its files are listed in pyproject.toml's package-data), so
`pabench leaderboard build` and `show` work from a wheel, without a clone."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["pabench*"]), "pabench.official"],
    package_dir={"pabench.official": "leaderboard"},
)
