"""Leases among server processes (``lanner.db.leases``) and the loop base that uses them (``lanner.periodic``), on
SQLite and PostgreSQL: one holder at a time, renewal, takeover once expired or released, only the holder's loop
passing, and the shared lock serialising a check-then-claim across connections. Several ``Database`` objects on
one database stand for several processes here; tests/test_e2e_leases.py runs real ``lanner serve`` processes."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psutil
import pytest
from sqlalchemy import text, update

from lanner.db import Database
from lanner.db.leases import Lease, LeaseRow, holders, shared_lock, this_machine
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


# A process holding a lease for an hour until it is killed; argv[3], when given, stands for the machine it runs on
# (what another host's process writes: its own boot and namespaces, hashed).
HOLDER = """
import sys, time
from lanner.db import Database, leases
if len(sys.argv) > 3:
    leases.this_machine = lambda: sys.argv[3]
lease = leases.Lease(Database(sys.argv[1]), sys.argv[2], lambda: 3600.0)
assert lease.hold()
print(lease.holder, flush=True)
time.sleep(3600)
"""


def _holder(database_url: str, name: str, machine: str | None = None) -> tuple[subprocess.Popen, str]:
    """A real process holding ``name``; returns it and its holder name, once it holds the lease."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, database_url, name, *([machine] if machine else [])],
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    holder = process.stdout.readline().strip()
    assert holder, "the holder process did not start"
    return process, holder


def _held_by(db: Database, name: str) -> str | None:
    with db.session() as session:
        return holders(session).get(name)


@pytest.mark.skipif(this_machine() is None, reason="no /proc to prove a process dead: leases only expire")
def test_a_dead_holder_on_this_machine_is_taken_at_once_and_a_live_one_never(dbs: list[Database],
                                                                             database_url: str) -> None:
    """A server restarted after kill -9 takes its predecessor's leases at once (an hour's lease here): the
    predecessor is provably dead, on this machine. While it lives, it keeps them, tried again and again."""
    successor = Lease(dbs[0], "lanner-test", lambda: 3600.0)
    process, holder = _holder(database_url, "lanner-test")
    try:
        for _ in range(5):
            assert not successor.hold()
        assert _held_by(dbs[1], "lanner-test") == holder
        process.send_signal(signal.SIGKILL)
        # Not yet reaped by its parent: a zombie cannot renew anything.
        wait_for(lambda: psutil.Process(process.pid).status() == psutil.STATUS_ZOMBIE, timeout=WAIT,
                 what="the holder to be a zombie", every=0.05)
        assert successor.hold()
        assert _held_by(dbs[1], "lanner-test") == successor.holder
    finally:
        process.kill()
        process.wait()
    assert successor.hold()  # and renewed as usual


def test_a_recycled_pid_is_not_its_holder(dbs: list[Database]) -> None:
    """The holder's pid now belongs to a later process (here: this one, with another start time): taken at once;
    the same pid and start time (this live process, through another of its apps) never."""
    first, second = (Lease(db, "lanner-test", lambda: 3600.0) for db in dbs[:2])
    assert first.hold() and not second.hold()  # a live holder, in this very process
    with dbs[2].session() as session:
        process = session.get(LeaseRow, "lanner-test").process
        if process is None:
            pytest.skip("no /proc to prove a process dead: leases only expire")
        machine, pid, _ = process.split(":")
        session.execute(update(LeaseRow).values(process=f"{machine}:{pid}:1"))
    assert second.hold() and not first.hold()


def test_a_holder_on_another_machine_is_not_taken_before_its_lease_expires(dbs: list[Database],
                                                                           database_url: str) -> None:
    """A process of another machine cannot be seen from here, dead or alive (its pid may be free here, or
    another's): its lease is taken only once it expires, whatever happened to it."""
    process, holder = _holder(database_url, "lanner-test", machine="another-machine")
    process.kill()
    process.wait()
    successor = Lease(dbs[0], "lanner-test", lambda: 3600.0)
    for _ in range(5):
        assert not successor.hold()
    assert _held_by(dbs[1], "lanner-test") == holder
    with dbs[1].session() as session:  # the hour is over
        session.execute(update(LeaseRow).values(expires_at=LeaseRow.expires_at - 7200))
    assert successor.hold()
