"""Loaded models, kept under a memory budget: least recently used first out, keyed by weights digest.

A model is loaded once however many requests want it at the same moment: the first caller loads (outside the
cache's lock, so other models stay available meanwhile), the others wait for that load and share its result,
or its error; an error is not remembered, so the next request tries again. After a load, the least recently
used models are dropped until the total fits the budget. The newest model always stays, even alone over the
budget: it is being asked for, and refusing it would not free anything. A dropped model that a batch is still
using lives on until that batch ends (the batch holds a reference), then its memory goes with it.

Thread-safe and generic: the loader and the size function are given, so tests use plain objects.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Generic, TypeVar

M = TypeVar("M")


@dataclass(frozen=True)
class CacheStats:
    models: int
    bytes: int
    budget: int
    loads: int
    evictions: int


class ModelCache(Generic[M]):
    def __init__(self, budget_bytes: int, *, size_of: Callable[[M], int]) -> None:
        self.budget = budget_bytes
        self._size_of = size_of
        self._lock = threading.Lock()
        self._models: OrderedDict[str, tuple[M, int]] = OrderedDict()  # digest -> (model, bytes), oldest first
        self._loading: dict[str, Future[M]] = {}
        self._bytes = 0
        self._loads = 0
        self._evictions = 0

    def get(self, digest: str, load: Callable[[], M]) -> M:
        """The model with weights ``digest``, loaded by ``load()`` if it is not here (once, however many ask)."""
        with self._lock:
            if digest in self._models:
                self._models.move_to_end(digest)
                return self._models[digest][0]
            pending = self._loading.get(digest)
            if pending is None:
                pending = self._loading[digest] = Future()
                loader = True
            else:
                loader = False
        if not loader:
            return pending.result()
        try:
            model = load()
            size = max(0, int(self._size_of(model)))
        except BaseException as error:
            with self._lock:
                del self._loading[digest]
            pending.set_exception(error)
            raise
        with self._lock:
            del self._loading[digest]
            self._models[digest] = (model, size)
            self._bytes += size
            self._loads += 1
            self._evict_over_budget(keep=digest)
        pending.set_result(model)
        return model

    def peek(self, digest: str) -> M | None:
        """The model if it is loaded, without loading it or changing the order."""
        with self._lock:
            entry = self._models.get(digest)
            return entry[0] if entry is not None else None

    def _evict_over_budget(self, *, keep: str) -> None:
        for digest in list(self._models):
            if self._bytes <= self.budget:
                return
            if digest == keep:
                continue
            _, size = self._models.pop(digest)
            self._bytes -= size
            self._evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._models.clear()
            self._bytes = 0

    def digests(self) -> list[str]:
        """Loaded models, least recently used first."""
        with self._lock:
            return list(self._models)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(len(self._models), self._bytes, self.budget, self._loads, self._evictions)
