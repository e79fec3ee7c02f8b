"""pabench: benchmark and leaderboard for privacy-preserving action recognition.

The path of a clip, one room per step (no two rooms import each other, directly or through
others: tests/test_rooms.py):

    submission/    the file: archive and member checks, loading, behavioural checks, export
    anonymizers/   in-repo baselines by name (`baseline:NAME`) and the f_A network
    data/          "the clips of split S of dataset D": pa-synth, real builders, the loader
    protocols/     the catalog: one literal spec per id@version
    evaluation/    config -> data -> anonymize once -> fit targets and attackers -> score -> record
    training/      fitting to a plateau; methods/ one learned anonymizer per module
    models/        the model zoo
    records/       typed, versioned records and their files (torch-free)
    leaderboard/   records -> static site, calibration, archive (torch-free)
    review/        a submitter's pack and the maintainer's verification: an official row
    integrations/  FiftyOne and Hugging Face Hub publishing
    cli/           parse, call one library function, print
    io.py          torch-free plumbing; runtime.py the torch runtime (devices, DDP)
"""

__version__ = "0.1.0"

__all__ = ["__version__", "evaluate"]


def __getattr__(name: str):
    # Lazy so that `import pabench` stays fast for the CLI's --help and for builders.
    if name == "evaluate":
        from pabench.evaluation import evaluate

        return evaluate
    raise AttributeError(name)
