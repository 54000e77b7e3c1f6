"""How long a background loop stays without a leader after its leader is killed with -9, on PostgreSQL.

Three processes each run a ``BackgroundLoop`` with the lease every server loop uses (``lanner.db.leases``; a
pass every 0.5 s, as the supervisor in tests); each round the leader (read from the ``leases`` table) is killed
with SIGKILL and a fresh process takes its place, and the time from the kill to the first pass of its successor
is measured (each pass writes its time to the ``bench_passes`` table). Then a graceful stop (SIGTERM: the lease
is released) for comparison.

    benchmarks/lease_takeover.py --rounds 5 --lease 15 --lease 3 [--write]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402

from benchmarks.common import cpu_model, write_section  # noqa: E402
from lanner.db import Database  # noqa: E402
from lanner.db.migrate import upgrade_database  # noqa: E402
from tests.pg import PostgresCluster  # noqa: E402

TITLE = "Lease takeover after kill -9 (several server processes on PostgreSQL)"
CHILD = """
import logging, signal, sys, threading, time
from sqlalchemy import text
from lanner.db import Database
from lanner.db.leases import Lease
from lanner.periodic import BackgroundLoop

db = Database(sys.argv[1])
lease = Lease(db, "bench-loop", lambda: float(sys.argv[2]))

class Bench(BackgroundLoop):
    def one_pass(self):
        with db.session() as session:
            session.execute(text("INSERT INTO bench_passes (holder, at) "
                                 "VALUES (:h, extract(epoch from clock_timestamp()))"), {"h": lease.holder})

loop = Bench("bench-loop", lambda: 0.5, logging.getLogger("bench"), lease=lease)
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
loop.start()
done.wait()
loop.stop()
"""


def spawn(url: str, lease: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, url, str(lease)], cwd=ROOT)


def leader(db: Database) -> tuple[str, float] | None:
    with db.session() as session:
        row = session.execute(text("SELECT holder, expires_at FROM leases WHERE name = 'bench-loop'")).first()
    return (row[0], row[1]) if row else None


def first_pass_after(db: Database, holder: str, since: float) -> float | None:
    with db.session() as session:
        return session.execute(text("SELECT min(at) FROM bench_passes WHERE holder <> :h AND at > :t"),
                               {"h": holder, "t": since}).scalar()


def now(db: Database) -> float:
    with db.session() as session:
        return float(session.execute(text("SELECT extract(epoch from clock_timestamp())")).scalar_one())


def measure(db: Database, url: str, lease: float, rounds: int, sig: signal.Signals) -> list[float]:
    processes = [spawn(url, lease) for _ in range(3)]
    times: list[float] = []
    try:
        for _ in range(rounds):
            while (held := leader(db)) is None or held[1] < now(db):
                time.sleep(0.05)
            pid = int(held[0].split(":")[1])
            victim = next(p for p in processes if p.pid == pid)
            time.sleep(1.0)  # a few renewals: killed mid-lease, as a real leader would be
            killed_at = now(db)
            victim.send_signal(sig)
            victim.wait()
            processes.remove(victim)
            processes.append(spawn(url, lease))
            while (first := first_pass_after(db, held[0], killed_at)) is None:
                time.sleep(0.02)
            times.append(first - killed_at)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lease", type=float, action="append", help="lease seconds (repeatable; default 15)")
    parser.add_argument("--write", action="store_true", help="write the result into docs/benchmarks.md")
    args = parser.parse_args()
    cluster = PostgresCluster().start()
    rows = []
    try:
        cluster.execute("CREATE DATABASE bench")
        url = cluster.url("bench")
        upgrade_database(url)
        db = Database(url)
        with db.session() as session:
            session.execute(text("CREATE TABLE bench_passes (holder VARCHAR(120), at DOUBLE PRECISION)"))
        for lease in args.lease or [15.0]:
            for sig in (signal.SIGKILL, signal.SIGTERM):
                times = measure(db, url, lease, args.rounds, sig)
                name = "kill -9" if sig == signal.SIGKILL else "stop (SIGTERM)"
                rows.append(f"| {lease:g} s | {name} | {statistics.median(times):.1f} s | {min(times):.1f}–"
                            f"{max(times):.1f} s | {len(times)} |")
                print(rows[-1], flush=True)
        db.dispose()
    finally:
        cluster.stop()
    section = (f"## {TITLE}\n\n`benchmarks/lease_takeover.py --rounds {args.rounds}` on {cpu_model()}, "
               f"{os.cpu_count()} cores, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, PostgreSQL 15 on the same machine: "
               "three processes run a "
               "loop with a pass every 0.5 s under one lease; the leader is stopped each round and the time is "
               "from the signal to the first pass of its successor (both on the database's clock).\n\n"
               "| `LANNER_LEASE_SECONDS` | leader | median | range | rounds |\n|---|---|---:|---:|---:|\n"
               + "\n".join(rows) + "\n\nA leader killed outright is taken over once its lease expires: between "
               "the lease and a third more (its successor tries every third of the lease), less the part of the "
               "lease already run down when it died. A stopping server releases its leases, so another process "
               "leads within a third of the lease.")
    print(section)
    if args.write:
        write_section(f"## {TITLE}", section)


if __name__ == "__main__":
    main()
