"""A server killed with -9 and started again leads its background loops from its first try (issue 30), on SQLite
and on PostgreSQL: its predecessor's lease rows still look held (their hour has not run out here), but their
holder is provably dead on this machine (``lanner.db.leases.provably_dead``), so the new process takes them at
once instead of a whole lease later. The time it takes is measured in benchmarks/lease_takeover.py; here the
lease is an hour, so a takeover that waited for expiry would never come within the test's patience."""

from __future__ import annotations

import itertools
import signal
from pathlib import Path

import pytest
from sqlalchemy import select

from lanner.db import Database
from lanner.db.leases import LeaseRow, this_machine
from tests.pg import PostgresCluster
from tests.servers import Server, free_port, start_server, wait_for

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(this_machine() is None, reason="no /proc to prove a process dead")]
_databases = itertools.count()
LEASE_SECONDS = "3600"


def _led_by(db: Database, server: Server) -> set[str]:
    """The loops whose lease ``server``'s process holds."""
    with db.session() as session:
        rows = session.execute(select(LeaseRow.name, LeaseRow.holder)).all()
    return {name for name, holder in rows if int(holder.split(":")[1]) == server.process.pid}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_server_restarted_after_kill_9_leads_its_loops_at_once(backend: str, tmp_path: Path,
                                                                 request: pytest.FixtureRequest) -> None:
    home = tmp_path / "home"
    settings = {"LANNER_LEASE_SECONDS": LEASE_SECONDS}
    if backend == "postgresql":
        postgres: PostgresCluster = request.getfixturevalue("postgres")
        name = f"lanner_restart_{next(_databases)}"
        postgres.execute(f"CREATE DATABASE {name} TEMPLATE lanner_template")
        settings["LANNER_DATABASE_URL"] = url = postgres.url(name)
    else:
        url = f"sqlite:///{home / 'lanner.db'}"
    port = free_port()
    server = start_server(home, port, **settings)
    db = Database(url)
    try:
        led = wait_for(lambda: (loops := _led_by(db, server)) >= {"lanner-supervisor", "lanner-imports"} and loops,
                       timeout=60, what="the first server to lead its loops")
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        assert _led_by(db, server) == led  # its rows stay, unexpired: an hour's lease
        server = start_server(home, port, log_name="restarted.log", **settings)
        wait_for(lambda: _led_by(db, server) >= led, timeout=60,
                 what=f"the restarted server to lead {sorted(led)} (an hour's lease: not by expiry)")
    finally:
        server.stop()
        db.dispose()
