"""The package's shape: no import cycle between rooms (module-level imports; those under
TYPE_CHECKING aside) and no module over 400 lines. (Torch-free records and site:
tests/test_leaderboard_archive.py.)"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pabench"
MAX_LINES = 400


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1].removesuffix(".py") if len(parts) > 1 else ""


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_imports() -> dict[str, set[str]]:
    """Which room imports which at module level."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        me = _room(_module(path))
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            for n in ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node]:
                names = ([n.module] if isinstance(n, ast.ImportFrom) and n.level == 0
                         and n.module else [a.name for a in n.names]
                         if isinstance(n, ast.Import) else [])
                for name in names:
                    if name.startswith("pabench.") and _room(name) not in ("", me):
                        edges[me].add(_room(name))
    return edges


def test_no_room_imports_a_room_that_imports_it_back() -> None:
    edges = room_imports()

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    cycles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in reach(b)})
    assert cycles == []
    assert "training" in edges["evaluation"] and "evaluation" not in reach("training")


def test_no_module_over_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
