"""A name -> spec mapping shared by the dataset, anonymizer, model and protocol registries."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from pabench.errors import PabenchError, unknown_name

T = TypeVar("T")


class Registry(Generic[T]):
    """Ordered registry; unknown lookups raise a PabenchError naming the closest valid key.

    `modules` lists the modules that register entries; the first lookup imports them, so every
    caller sees the full registry whatever it imported before (heavy modules stay lazy)."""

    def __init__(self, kind: str, modules: Sequence[str] = ()) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._modules = tuple(modules)
        self._loaded = not self._modules

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True  # before importing: the modules call `add` on this registry
            for module in self._modules:
                importlib.import_module(module)

    def add(self, name: str, item: T) -> T:
        if name in self._items:
            raise PabenchError(f"{self.kind} '{name}' is registered twice")
        self._items[name] = item
        return item

    def register(self, name: str) -> Callable[[T], T]:
        def deco(item: T) -> T:
            return self.add(name, item)

        return deco

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._items[name]
        except KeyError:
            raise unknown_name(self.kind, name, self._items) from None

    def names(self) -> list[str]:
        self._load()
        return list(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        self._load()
        return iter(self._items.items())

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __len__(self) -> int:
        self._load()
        return len(self._items)
