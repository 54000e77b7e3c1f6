"""The one base of the background loops (``lanner.periodic.BackgroundLoop``): off at interval 0 with passes driven
by hand, a first pass at once when started, woken, stopped and started again, a failing pass logged and retried,
and the heartbeat every loop of the app exposes. Threads are waited for through events, never for a time."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from lanner.app import background_loops
from lanner.periodic import BackgroundLoop
from tests.servers import wait_for

WAIT = 30.0  # seconds an event may take on a loaded machine before the test fails


class Counting(BackgroundLoop):
    """Counts its passes; fails the passes whose number is in ``failing``; ``passed`` is set after each pass."""

    def __init__(self, interval: float, *, failing: tuple[int, ...] = (), first_pass_at_start: bool = True,
                 quiet: float = 0.0) -> None:
        super().__init__("test-loop", lambda: self.seconds, logging.getLogger("tests.periodic"),
                         first_pass_at_start=first_pass_at_start, quiet=quiet)
        self.seconds = interval
        self.failing = failing
        self.passes = 0
        self.passed = threading.Event()

    def one_pass(self) -> int:
        self.passes += 1
        try:
            if self.passes in self.failing:
                raise RuntimeError(f"pass {self.passes} broke")
            return self.passes
        finally:
            self.passed.set()

    def next_pass(self) -> None:
        assert self.passed.wait(WAIT), "no pass came"
        self.passed.clear()


def test_at_interval_zero_it_never_starts_and_passes_are_run_by_hand() -> None:
    loop = Counting(0)
    loop.start()
    loop.wake()
    assert not loop.started and loop.passes == 0
    assert loop.heartbeat().last_pass_at is None
    assert loop.run_once() == 1
    beat = loop.heartbeat()
    assert (beat.name, beat.started, beat.interval) == ("test-loop", False, 0)
    assert beat.last_pass_at is not None and beat.last_failure_at is None
    loop.stop()  # stopping a loop that never started is harmless


def test_started_it_passes_at_once_then_when_woken_and_not_after_stop() -> None:
    loop = Counting(3600)  # no pass would come from the interval during the test
    loop.start()
    try:
        assert loop.started
        loop.next_pass()  # the first pass comes at once
        loop.wake()
        loop.next_pass()
        assert loop.passes == 2 and loop.heartbeat().started
    finally:
        loop.stop()
    assert not loop.started and not loop.heartbeat().started
    loop.wake()  # nothing runs a stopped loop's passes
    assert loop.passes == 2
    loop.start()  # started again: a fresh thread, a first pass at once again
    try:
        loop.next_pass()
        assert loop.passes == 3
    finally:
        loop.stop()


def test_a_quiet_loop_passes_once_the_wakes_pause_and_stops_while_it_waits_for_that() -> None:
    """``quiet``: a woken loop waits for the wakes to pause (the settle loop, woken by each completed upload)."""
    loop = Counting(3600, first_pass_at_start=False, quiet=3600)  # the wakes never pause long enough here
    loop.start()
    for _ in range(3):
        loop.wake()
    wait_for(lambda: loop._wake.is_set() is False, timeout=WAIT, what="the loop to take the wakes")
    loop.stop()  # not held up by the wait for quiet, and no pass is run for the wakes on the way out
    assert loop.passes == 0 and not loop.started
    quick = Counting(3600, first_pass_at_start=False, quiet=0.01)
    quick.start()
    try:
        quick.wake()
        quick.next_pass()  # the wakes paused: one pass for them
        assert quick.passes == 1
    finally:
        quick.stop()


def test_a_loop_without_a_first_pass_at_start_waits_its_interval() -> None:
    loop = Counting(3600, first_pass_at_start=False)
    loop.start()
    loop.stop()  # stop wakes the thread, which sees it is stopping before any pass
    assert loop.passes == 0


def test_a_failing_pass_is_logged_and_the_next_one_retries(caplog: pytest.LogCaptureFixture) -> None:
    loop = Counting(3600, failing=(1,))
    with caplog.at_level(logging.ERROR, logger="tests.periodic"):
        loop.start()
        try:
            loop.next_pass()
            wait_for(lambda: loop.heartbeat().last_failure_at, timeout=WAIT, what="the failure in the heartbeat")
            failed = loop.heartbeat()
            assert failed.last_pass_at is None
            assert failed.last_error == "RuntimeError: pass 1 broke"
            loop.wake()
            loop.next_pass()  # the thread survived its failing pass
        finally:
            loop.stop()
    assert "test-loop pass failed; the next pass retries" in caplog.text
    recovered = loop.heartbeat()
    assert recovered.last_pass_at is not None and recovered.last_failure_at is not None
    assert recovered.last_pass_at > recovered.last_failure_at  # healthy again; the last failure is still known


def test_a_pass_run_by_hand_raises_its_error_and_records_it() -> None:
    loop = Counting(0, failing=(1,))
    with pytest.raises(RuntimeError, match="pass 1 broke"):
        loop.run_once()
    assert loop.heartbeat().last_failure_at is not None and loop.heartbeat().last_pass_at is None


def test_every_background_loop_of_the_app_is_one_and_beats(app: Any) -> None:
    loops = background_loops(app)
    assert sorted(loops) == ["lanner-assistant", "lanner-autolabel", "lanner-bucket-imports", "lanner-deployments",
                             "lanner-embeddings", "lanner-endpoint-log", "lanner-exports", "lanner-imports",
                             "lanner-maintenance", "lanner-review", "lanner-supervisor", "lanner-upload-settle"]
    assert all(isinstance(loop, BackgroundLoop) for loop in loops.values())
    # Only the endpoint request log runs in every process (each logs its own requests); every other loop's work
    # is the cluster's, done by the one process holding its lease.
    assert {name for name, loop in loops.items() if loop.lease is None} == {"lanner-endpoint-log"}
    app.state.maintenance.run_once()
    assert loops["lanner-maintenance"].heartbeat().last_pass_at is not None
