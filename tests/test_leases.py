"""Leases among server processes (``lanner.db.leases``) and the loop base that uses them (``lanner.periodic``), on
SQLite and PostgreSQL: one holder at a time, renewal, takeover once expired or released, only the holder's loop
passing, and the shared lock serialising a check-then-claim across connections. Several ``Database`` objects on
one database stand for several processes here; tests/test_e2e_leases.py runs real ``lanner serve`` processes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from lanner.db import Database
from lanner.db.leases import Lease, holders, shared_lock
from lanner.periodic import BackgroundLoop
from tests.servers import wait_for

WAIT = 30.0


@pytest.fixture
def dbs(database_url: str) -> Iterator[list[Database]]:
    """Three processes' engines on one database."""
    engines = [Database(database_url) for _ in range(3)]
    yield engines
    for db in engines:
        db.dispose()


def test_one_holder_at_a_time_renewed_then_taken_over_once_expired(dbs: list[Database]) -> None:
    seconds = {"value": 3600.0}
    first, second = (Lease(db, "lanner-test", lambda: seconds["value"]) for db in dbs[:2])
    assert first.holder != second.holder
    assert first.hold() and not second.hold()
    assert first.hold()  # renewed by its holder
    with dbs[2].session() as session:
        assert holders(session) == {"lanner-test": first.holder}
    # The holder dies without releasing: its lease holds until it expires, on the database's clock.
    seconds["value"] = 0.2
    assert first.hold()
    assert wait_for(second.hold, timeout=WAIT, what="the expired lease to be taken over", every=0.05)
    assert not first.hold()  # the old holder learns it lost it
    second.release()
    assert first.hold()  # released: free at once


def test_release_only_gives_up_ones_own_lease(dbs: list[Database]) -> None:
    first, second = (Lease(db, "lanner-test", lambda: 3600.0) for db in dbs[:2])
    assert first.hold()
    second.release()
    assert not second.hold() and first.hold()


class Passing(BackgroundLoop):
    def __init__(self, db: Database, name: str) -> None:
        super().__init__(name, lambda: 3600.0, logging.getLogger("tests.leases"),
                         lease=Lease(db, "lanner-test-loop", lambda: 0.6))
        self.passes = 0
        self.leads = 0
        self.passed = threading.Event()

    def on_lead(self) -> None:
        self.leads += 1

    def one_pass(self) -> None:
        self.passes += 1
        self.passed.set()


def test_only_the_leaseholder_passes_and_another_takes_over_when_it_stops(dbs: list[Database]) -> None:
    loops = [Passing(db, f"loop-{n}") for n, db in enumerate(dbs)]
    try:
        for loop in loops:
            loop.start()
        leader = wait_for(lambda: next((loop for loop in loops if loop.passes), None), timeout=WAIT,
                          what="a leader's first pass")
        assert leader.leading and leader.leads == 1
        for loop in loops:
            loop.wake()
        leader.passed.clear()
        leader.wake()
        assert leader.passed.wait(WAIT)
        time.sleep(1.0)  # several renewals by every keeper: the others never pass meanwhile
        assert [loop.passes > 0 for loop in loops].count(True) == 1
        assert [loop.leading for loop in loops].count(True) == 1

        leader.stop()  # releases its lease: another takes over within a third of it and passes at once
        others = [loop for loop in loops if loop is not leader]
        successor = wait_for(lambda: next((loop for loop in others if loop.passes), None), timeout=WAIT,
                             what="another loop to take over")
        assert successor.leading and successor.leads == 1 and not leader.leading
        assert [loop.leading for loop in others].count(True) == 1
    finally:
        for loop in loops:
            loop.stop()


def test_a_loop_without_a_lease_passes_everywhere(dbs: list[Database]) -> None:
    class Free(BackgroundLoop):
        def one_pass(self) -> None:
            return None

    loop = Free("free", lambda: 0, logging.getLogger("tests.leases"))
    assert loop.leading and loop.lease is None


def test_the_shared_lock_serialises_a_check_and_its_claim(dbs: list[Database]) -> None:
    """Two processes each count the claims and claim when fewer than one: under the lock only one ever does."""
    with dbs[0].session() as session:
        session.execute(text("CREATE TABLE test_claims (holder VARCHAR(20))"))
    inside = threading.Event()

    def claim(db: Database, name: str, hold: bool) -> None:
        with db.session() as session:
            shared_lock(session, "test-claims")
            count = session.execute(text("SELECT count(*) FROM test_claims")).scalar_one()
            if hold:  # the first one keeps its transaction open after counting: the other must wait for it
                inside.set()
                time.sleep(0.5)
            if count < 1:
                session.execute(text("INSERT INTO test_claims VALUES (:h)"), {"h": name})

    first = threading.Thread(target=claim, args=(dbs[0], "first", True))
    first.start()
    assert inside.wait(WAIT)
    claim(dbs[1], "second", False)
    first.join()
    with dbs[2].session() as session:
        assert session.execute(text("SELECT holder FROM test_claims")).scalars().all() == ["first"]


def test_a_wake_in_a_process_that_does_not_lead_wakes_the_leader(dbs: list[Database], database_url: str) -> None:
    """A request handled by any process starts its work at once (PostgreSQL's NOTIFY reaches the leader)."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite serves one process: its loops lead, and wake themselves")
    loops = [Passing(db, f"loop-{n}") for n, db in enumerate(dbs[:2])]
    try:
        for loop in loops:
            loop.start()
        leader = wait_for(lambda: next((loop for loop in loops if loop.passes), None), timeout=WAIT,
                          what="a leader's first pass")
        follower = next(loop for loop in loops if loop is not leader)
        for _ in range(3):  # the interval is an hour: each pass here comes from the follower's wake
            passes = leader.passes
            leader.passed.clear()
            follower.wake()
            assert leader.passed.wait(WAIT) and leader.passes == passes + 1
        assert follower.passes == 0
    finally:
        for loop in loops:
            loop.stop()
