"""Dynamic batching: requests for the same key (model and image size) that arrive together run as one batch.

Each key has a lane: the requests waiting for it and at most one batch running. When a batch ends, the requests
that arrived meanwhile form the next one at once (up to ``max_batch``, or the key's own ``limit`` under it); so
under load, batches fill by themselves. A request that finds its lane idle waits up to ``window_s`` for
company, but only once requests have been arriving together (the lane's last batch held more than one, within
the last second, or others wait already): a lone client never pays the window.

A batch runs ``run(key, items)`` on the executor (off the event loop) and gets back one result per item, in
order; an item's result may be an exception, which fails that item alone. An exception raised by ``run`` fails
every request of that batch and no other. A request whose caller went away (its task was cancelled) is left out
of the batch it would have joined, or its result is dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
I = TypeVar("I")  # noqa: E741 - the item type
R = TypeVar("R")

TOGETHER_SECONDS = 1.0  # a lane whose last batch held several requests counts as busy for this long


@dataclass
class _Lane(Generic[I]):
    waiting: list[tuple[I, asyncio.Future[Any]]] = field(default_factory=list)
    full: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


@dataclass
class BatchStats:
    batches: int = 0
    items: int = 0
    largest: int = 0
    sizes: list[int] = field(default_factory=list)  # the last 1000 batch sizes, oldest first

    def record(self, size: int) -> None:
        self.batches += 1
        self.items += size
        self.largest = max(self.largest, size)
        self.sizes.append(size)
        del self.sizes[:-1000]


class Batcher(Generic[K, I, R]):
    def __init__(self, run: Callable[[K, list[I]], Sequence[R | BaseException]], *,
                 executor: Executor | Callable[[], Executor],
                 max_batch: int = 16, window_s: float = 0.005, limit: Callable[[K], int] | None = None) -> None:
        self._run = run
        self._executor = executor  # or a function giving the current one (a predictor restarted with its app)
        self.max_batch = max(1, max_batch)
        self._limit = limit  # a key's own cap under max_batch (the predictor's pixel cap on a CPU)
        self.window_s = max(0.0, window_s)
        self._lanes: dict[K, _Lane[I]] = {}
        self._together_until: dict[K, float] = {}
        self.stats = BatchStats()

    def batch_size(self, key: K) -> int:
        """The most items one batch of ``key`` may hold."""
        return max(1, min(self.max_batch, self._limit(key))) if self._limit is not None else self.max_batch

    async def submit(self, key: K, item: I) -> R:
        """Queue ``item`` on ``key``'s lane and wait for its result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
        lane.waiting.append((item, future))
        if len(lane.waiting) >= self.batch_size(key):
            lane.full.set()
        if lane.task is None:
            lane.task = loop.create_task(self._drain(key, lane))
        return await future

    def _busy(self, key: K, lane: _Lane[I]) -> bool:
        return len(lane.waiting) > 1 or self._together_until.get(key, 0.0) > time.monotonic()

    async def _drain(self, key: K, lane: _Lane[I]) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                lane.waiting = [entry for entry in lane.waiting if not entry[1].done()]
                if not lane.waiting:
                    return
                size = self.batch_size(key)
                if self.window_s > 0 and len(lane.waiting) < size and self._busy(key, lane):
                    lane.full.clear()
                    try:
                        await asyncio.wait_for(lane.full.wait(), self.window_s)
                    except TimeoutError:
                        pass
                    lane.waiting = [entry for entry in lane.waiting if not entry[1].done()]
                    if not lane.waiting:
                        return
                batch, lane.waiting = lane.waiting[:size], lane.waiting[size:]
                if len(lane.waiting) < size:
                    lane.full.clear()
                self.stats.record(len(batch))
                await self._run_batch(loop, key, batch)
                self._remember(key, len(batch))
        finally:
            lane.task = None
            if self._lanes.get(key) is lane:
                if lane.waiting:  # cancelled mid-wait (the loop is closing): fail what is left, never strand it
                    for _, future in lane.waiting:
                        if not future.done():
                            future.cancel()
                del self._lanes[key]

    async def _run_batch(self, loop: asyncio.AbstractEventLoop, key: K,
                         batch: list[tuple[I, asyncio.Future[Any]]]) -> None:
        try:
            executor = self._executor if isinstance(self._executor, Executor) else self._executor()
            results = await loop.run_in_executor(executor, self._run, key, [item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} gave {len(results)} results")
        except Exception as error:  # the batch's requests fail; the lane goes on with the next batch
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():  # its caller went away
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    def _remember(self, key: K, size: int) -> None:
        now = time.monotonic()
        if size > 1:
            self._together_until[key] = now + TOGETHER_SECONDS
        else:
            self._together_until.pop(key, None)
        if len(self._together_until) > 1000:  # keys of models no longer asked for
            self._together_until = {k: t for k, t in self._together_until.items() if t > now}
