"""The model cache (LRU under a byte budget, one load however many ask) and the dynamic batcher (requests merged,
results routed back to their own caller, an exception failing only its batch), on plain objects."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from lanner.inference.batcher import Batcher
from lanner.inference.cache import ModelCache


@dataclass
class Fake:
    name: str
    size: int


def _cache(budget: int) -> tuple[ModelCache[Fake], list[str]]:
    loads: list[str] = []
    return ModelCache(budget, size_of=lambda m: m.size), loads


def _loader(loads: list[str], name: str, size: int):
    def load() -> Fake:
        loads.append(name)
        return Fake(name, size)
    return load


def test_the_cache_evicts_the_least_recently_used_to_stay_under_its_budget() -> None:
    cache, loads = _cache(250)
    for name in ("a", "b"):
        cache.get(name, _loader(loads, name, 100))
    assert cache.get("a", _loader(loads, "a", 100)).name == "a"  # a hit: a is now the most recent
    cache.get("c", _loader(loads, "c", 100))  # 300 > 250: b, the least recently used, goes
    assert cache.digests() == ["a", "c"] and loads == ["a", "b", "c"]
    assert cache.stats().bytes == 200 and cache.stats().evictions == 1
    cache.get("b", _loader(loads, "b", 100))  # back again: loaded again, a goes
    assert cache.digests() == ["c", "b"] and loads[-1] == "b"
    cache.get("big", _loader(loads, "big", 1000))  # alone over the budget: kept, everything else goes
    assert cache.digests() == ["big"] and cache.stats().bytes == 1000
    assert cache.peek("c") is None and cache.peek("big") is not None


def test_a_model_is_loaded_once_however_many_ask_and_a_failed_load_is_not_kept() -> None:
    cache, loads = _cache(10_000)
    gate = threading.Event()

    def slow() -> Fake:
        loads.append("m")
        gate.wait(5)
        return Fake("m", 1)

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(cache.get, "m", slow) for _ in range(8)]
        time.sleep(0.1)
        gate.set()
        models = {id(f.result()) for f in futures}
    assert loads == ["m"] and len(models) == 1

    def broken() -> Fake:
        raise RuntimeError("bad weights")

    with pytest.raises(RuntimeError):
        cache.get("x", broken)
    assert cache.get("x", _loader(loads, "x", 1)).name == "x"  # the next request tries again


# --- the batcher ------------------------------------------------------------------------------------------------

class Recorder:
    """A batch function that records every batch and answers each item with (key, item * 10)."""

    def __init__(self, delay: float = 0.0, fail_key: str | None = None) -> None:
        self.batches: list[tuple[str, list[int]]] = []
        self.delay = delay
        self.fail_key = fail_key

    def __call__(self, key: str, items: list[int]) -> list[object]:
        self.batches.append((key, list(items)))
        time.sleep(self.delay)
        if key == self.fail_key:
            raise RuntimeError(f"batch of {key} failed")
        return [ValueError(f"item {i} is bad") if i < 0 else (key, i * 10) for i in items]


def _run(coroutine):
    return asyncio.run(coroutine)


def test_requests_that_arrive_together_are_merged_and_each_gets_its_own_result() -> None:
    recorder = Recorder(delay=0.05)
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(recorder, executor=pool, max_batch=8, window_s=0.02)

        async def main() -> list[object]:
            return await asyncio.gather(*[batcher.submit("m", i) for i in range(20)])

        results = _run(main())
    assert results == [("m", i * 10) for i in range(20)]  # routed back to the right caller, in order
    sizes = [len(items) for _, items in recorder.batches]
    assert sum(sizes) == 20 and max(sizes) == 8 and len(sizes) <= 4  # merged, never over max_batch
    assert sorted(i for _, items in recorder.batches for i in items) == list(range(20))


def test_keys_never_share_a_batch() -> None:
    recorder = Recorder(delay=0.02)
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(recorder, executor=pool, max_batch=16, window_s=0.01)

        async def main() -> list[object]:
            return await asyncio.gather(*[batcher.submit("ab"[i % 2], i) for i in range(10)])

        results = _run(main())
    assert results == [("ab"[i % 2], i * 10) for i in range(10)]
    assert all(all("ab"[i % 2] == key for i in items) for key, items in recorder.batches)


def test_an_exception_fails_only_its_batch() -> None:
    recorder = Recorder(delay=0.02, fail_key="bad")
    with ThreadPoolExecutor(2) as pool:
        batcher = Batcher(recorder, executor=pool, max_batch=4, window_s=0.01)

        async def main() -> list[object]:
            requests = [batcher.submit("bad" if i < 3 else "good", i) for i in range(8)]
            return await asyncio.gather(*requests, return_exceptions=True)

        results = _run(main())

        async def again() -> object:
            return await batcher.submit("bad-then-fine", 7)

        assert _run(again()) == ("bad-then-fine", 70)  # the lanes go on serving
    assert all(isinstance(r, RuntimeError) for r in results[:3])
    assert results[3:] == [("good", i * 10) for i in range(3, 8)]


def test_an_item_result_that_is_an_exception_fails_that_item_alone() -> None:
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(Recorder(delay=0.02), executor=pool, max_batch=8, window_s=0.01)

        async def main() -> list[object]:
            return await asyncio.gather(*[batcher.submit("m", i) for i in (1, -1, 2)], return_exceptions=True)

        first, bad, second = _run(main())
    assert first == ("m", 10) and isinstance(bad, ValueError) and second == ("m", 20)


def test_a_lone_client_never_waits_for_the_window() -> None:
    """The window is an hour: a batcher that waited for it would trip the (much shorter) guard below, however
    slow the machine, so the test measures behaviour, not speed."""
    recorder = Recorder()
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(recorder, executor=pool, max_batch=8, window_s=3600)

        async def main() -> None:
            for i in range(5):
                assert await asyncio.wait_for(batcher.submit("m", i), 120) == ("m", i * 10)

        _run(main())
    assert [len(items) for _, items in recorder.batches] == [1] * 5


def test_batching_off_runs_one_by_one() -> None:
    recorder = Recorder(delay=0.01)
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(recorder, executor=pool, max_batch=1, window_s=0.01)

        async def main() -> list[object]:
            return await asyncio.gather(*[batcher.submit("m", i) for i in range(6)])

        assert _run(main()) == [("m", i * 10) for i in range(6)]
    assert [len(items) for _, items in recorder.batches] == [1] * 6


def test_a_caller_that_went_away_is_left_out() -> None:
    recorder = Recorder(delay=0.1)
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(recorder, executor=pool, max_batch=8, window_s=0.0)

        async def main() -> object:
            first = asyncio.ensure_future(batcher.submit("m", 1))  # runs alone, for 0.1 s
            await asyncio.sleep(0.02)
            gone = asyncio.ensure_future(batcher.submit("m", 2))
            kept = asyncio.ensure_future(batcher.submit("m", 3))
            await asyncio.sleep(0.02)
            gone.cancel()
            return await asyncio.gather(first, kept)

        assert _run(main()) == [("m", 10), ("m", 30)]
    assert [items for _, items in recorder.batches] == [[1], [3]]


def test_a_key_may_have_its_own_smaller_cap() -> None:
    recorder = Recorder(delay=0.05)
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(recorder, executor=pool, max_batch=8, window_s=0.02,
                          limit=lambda key: 2 if key == "big" else 100)

        async def main() -> list[object]:
            return await asyncio.gather(*[batcher.submit(key, i) for key in ("big", "small") for i in range(10)])

        _run(main())
    sizes = {key: [len(items) for k, items in recorder.batches if k == key] for key in ("big", "small")}
    assert max(sizes["big"]) == 2 and max(sizes["small"]) == 8  # the smaller of the two caps
