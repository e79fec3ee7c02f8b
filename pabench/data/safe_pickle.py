"""The one door through which pabench reads third-party pickles (label files from papers' repos).

A pickle can name any importable callable and have it called while loading, so a plain
`pickle.load` of a downloaded label file can run arbitrary code. This unpickler resolves only the
globals needed to rebuild numpy arrays inside builtin containers and refuses everything else
before anything is called.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
from numpy._core import multiarray

from pabench.errors import PabenchError

# (module, name) -> object. numpy 1.x pickles name `numpy.core`, numpy 2.x `numpy._core`.
_ALLOWED: dict[tuple[str, str], object] = {
    **{(module, name): getattr(multiarray, name)
       for module in ("numpy.core.multiarray", "numpy._core.multiarray")
       for name in ("_reconstruct", "scalar")},
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def __init__(self, file, path: Path) -> None:
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str) -> object:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise PabenchError(
                f"{self.path}: refusing to unpickle global '{module}.{name}' "
                "(only numpy arrays in builtin containers are allowed)"
            ) from None


def load_pickle(path: Path) -> object:
    """Load a label pickle that may hold only builtins and numpy arrays; else one-line error."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return _NumpyOnlyUnpickler(f, path).load()
    except PabenchError:
        raise
    except OSError as e:
        raise PabenchError(f"{path}: cannot read ({e.strerror})") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as e:
        raise PabenchError(f"{path}: not a valid label pickle ({type(e).__name__}: {e})") from None
