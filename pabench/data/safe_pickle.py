"""The one door through which pabench reads third-party pickles (label files from papers' repos).

A pickle can name any importable callable and have it called while loading, so a plain
`pickle.load` of a downloaded label file can run arbitrary code. This unpickler resolves only the
globals needed to rebuild numpy arrays inside builtin containers and refuses everything else
before anything is called.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np
from numpy._core import multiarray, numeric

from pabench.errors import PabenchError


def _frombuffer(buf: object, dtype: object, shape: object, order: object,
                axis_order: object = None) -> np.ndarray:
    """numpy's protocol-5 array rebuild, admitted only for an in-band buffer of a plain dtype.

    Protocol 5 pickles arrays as `_frombuffer(bytearray, dtype, shape, order)`; numpy's own
    function is called only after checking that it gets exactly such arguments."""
    if not (isinstance(buf, bytes | bytearray) and isinstance(dtype, np.dtype)
            and not dtype.hasobject and isinstance(shape, tuple)
            and all(isinstance(n, int) for n in shape) and order in ("C", "F", "K")
            and (axis_order is None or isinstance(axis_order, tuple))):
        raise pickle.UnpicklingError("unexpected arguments to numpy's array rebuild")
    return numeric._frombuffer(buf, dtype, shape, order, axis_order)


# (module, name) -> object. numpy 1.x pickles name `numpy.core`, numpy 2.x `numpy._core`.
_ALLOWED: dict[tuple[str, str], object] = {
    **{(module, name): getattr(multiarray, name)
       for module in ("numpy.core.multiarray", "numpy._core.multiarray")
       for name in ("_reconstruct", "scalar")},
    **{(module, "_frombuffer"): _frombuffer
       for module in ("numpy.core.numeric", "numpy._core.numeric")},
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


def loads_pickle(data: bytes, path: Path) -> object:
    """Load label-pickle bytes read from `path` that may hold only builtins and numpy arrays."""
    try:
        return _NumpyOnlyUnpickler(io.BytesIO(data), path).load()
    except PabenchError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, RecursionError, MemoryError, OverflowError) as e:
        problem = str(e).splitlines()[0] if str(e) else ""
        raise PabenchError(f"{path}: not a valid label pickle ({type(e).__name__}: "
                           f"{problem[:200]})") from None


def load_pickle(path: Path) -> object:
    """Load a label pickle that may hold only builtins and numpy arrays; else one-line error."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PabenchError(f"{path}: cannot read ({e.strerror})") from None
    return loads_pickle(data, path)
