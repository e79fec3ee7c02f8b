"""Symbolic-shape expressions in a `.pt2`: the deserializer hands each to `sympy.sympify`, which
`eval`s it, so pabench parses it first (`ast`, which runs nothing) and admits only what torch
writes: calls of sympy's and torch's shape functions on symbols and bounded numbers."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from pabench.submission.core import fail

MAX_EXPR_CHARS = 4096
_CORE = {
    "Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Mod", "Max", "Min", "Abs",
    "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "StrictLessThan", "StrictGreaterThan", "LessThan",
    "GreaterThan", "Equality", "Unequality", "And", "Or", "Not", "floor", "ceiling",
}
_CONSTANTS = {"True", "False", "true", "false", "oo", "zoo", "nan"}
_ASSUMPTIONS = {
    "positive", "negative", "nonnegative", "nonpositive", "integer", "real", "finite", "zero",
    "nonzero", "even", "odd", "rational", "commutative", "precision",
}
_POWERS = {"Pow", "PowByNatural", "FloatPow"}
MAX_EXPONENT = 64
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NUMERAL = re.compile(r"-?[0-9]{1,40}(\.[0-9]{0,40})?(e-?[0-9]{1,3})?\Z")


@cache
def _functions() -> frozenset[str]:
    """sympy's core constructors and torch's shape functions (its deserializer's `locals`)."""
    import torch.utils._sympy.functions as tfn

    torch_fns = {n for n in dir(tfn) if not n.startswith("_") and isinstance(getattr(tfn, n), type)}
    return frozenset(_CORE | torch_fns)


def check_expr(path: Path, expr: str) -> None:
    """Refuse an expression that is more than constructor calls on bounded literals. Powers
    may not nest and take small literal exponents: sympy evaluates integer powers eagerly."""
    shown = expr[:60]
    if len(expr) > MAX_EXPR_CHARS:
        raise fail(path, f"shape expression of {len(expr)} characters; refused")
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise fail(path, f"unparsable shape expression {shown!r}") from None
    try:
        _check(tree.body, False, _functions())
    except ValueError as e:
        raise fail(path, f"refused shape expression {shown!r} ({e})") from None
    except RecursionError:
        raise fail(path, f"shape expression {shown!r} nests too deeply") from None


def _small_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _small_int(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "Integer" and len(node.args) == 1 and not node.keywords:
        return _small_int(node.args[0])
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _check(node: ast.expr, in_power: bool, functions: frozenset[str]) -> None:
    if isinstance(node, ast.Constant):
        v = node.value
        if type(v) is bool or (type(v) is int and v.bit_length() <= 64) or type(v) is float:
            return
        if isinstance(v, str) and ((_IDENT.match(v) and "__" not in v) or _NUMERAL.match(v)):
            return
        raise ValueError(f"literal {str(v)[:20]!r}")
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return
        raise ValueError(f"name {node.id[:30]!r}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _check(node.operand, in_power, functions)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise ValueError(f"{type(node).__name__} is not a constructor call")
    name = node.func.id
    if name not in functions:
        raise ValueError(f"function {name[:30]!r}")
    for kw in node.keywords:
        if kw.arg not in _ASSUMPTIONS or not isinstance(kw.value, ast.Constant) \
                or type(kw.value.value) not in (bool, int):
            raise ValueError(f"keyword {str(kw.arg)[:30]!r}")
    power = name in _POWERS
    if power:
        if in_power:
            raise ValueError("nested powers")
        exponent = _small_int(node.args[-1]) if node.args else None
        if exponent is None or abs(exponent) > MAX_EXPONENT:
            raise ValueError(f"a power's exponent must be an integer literal up to {MAX_EXPONENT}")
    for arg in node.args:
        _check(arg, in_power or power, functions)
