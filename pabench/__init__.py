"""pabench: benchmark and leaderboard for privacy-preserving action recognition."""

__version__ = "0.1.0"

__all__ = ["__version__", "evaluate"]


def __getattr__(name: str):
    # Lazy so that `import pabench` stays fast for the CLI's --help and for builders.
    if name == "evaluate":
        from pabench.evaluation import evaluate

        return evaluate
    raise AttributeError(name)
