"""How long a background loop stays without a leader after its leader is killed with -9, on PostgreSQL.

Three processes each run a ``BackgroundLoop`` with the lease every server loop uses (``lanner.db.leases``; a
pass every 0.5 s, as the supervisor in tests); each round the leader (read from the ``leases`` table) is killed
with SIGKILL and a fresh process takes its place, and the time from the kill to the first pass of its successor
is measured (each pass writes its time to the ``bench_passes`` table). Each process stands either for a host of
its own (its machine identity replaced by a random one: nobody can prove a dead holder dead, the lease must
expire) or for a process of one host (the others, and the fresh one, see the dead pid and take over at once);
then a single process killed and started again (a restarted server on its host), and a graceful stop (SIGTERM:
the lease is released) for comparison. Last, a real ``lanner serve`` killed with -9 and started again: when its
supervisor's lease is taken (the lease row's ``acquired_at``) and when it answers /api/health, from its spawn.

    benchmarks/lease_takeover.py --rounds 5 --lease 15 --lease 3 [--serve-rounds 3] [--write]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
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
from tests.servers import free_port, start_server  # noqa: E402

TITLE = "Lease takeover after kill -9 (several server processes on PostgreSQL)"
CHILD = """
import logging, signal, sys, threading, time
from sqlalchemy import text
from lanner.db import Database
from lanner.db.leases import Lease
from lanner.periodic import BackgroundLoop

from lanner.db import leases
if sys.argv[3] == "own-host":  # another host's process: its pids cannot be checked from here
    machine = leases.secrets.token_hex(12)
    leases.this_machine = lambda: machine
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


def spawn(url: str, lease: float, hosts: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, url, str(lease), hosts], cwd=ROOT)


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


def measure(db: Database, url: str, lease: float, rounds: int, sig: signal.Signals, *, hosts: str = "own-host",
            count: int = 3) -> list[float]:
    """``count`` processes, each on its own host (``own-host``) or all on this one (``same-host``)."""
    processes = [spawn(url, lease, hosts) for _ in range(count)]
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
            processes.append(spawn(url, lease, hosts))
            while (first := first_pass_after(db, held[0], killed_at)) is None:
                time.sleep(0.02)
            times.append(first - killed_at)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait()
    return times


_serve_databases = itertools.count()


def measure_serve(cluster: PostgresCluster, lease: float, rounds: int) -> list[tuple[float, float]]:
    """A real ``lanner serve`` killed with -9 and started again ``rounds`` times: from each spawn, when the
    supervisor's lease was taken (on the database's clock) and when the server answered /api/health."""
    name = f"bench_serve_{next(_serve_databases)}"
    cluster.execute(f"CREATE DATABASE {name}")
    url = cluster.url(name)
    upgrade_database(url)
    db = Database(url)
    home = Path(tempfile.mkdtemp(prefix="lease-bench-"))
    settings = {"LANNER_DATABASE_URL": url, "LANNER_LEASE_SECONDS": str(lease)}
    port = free_port()
    times: list[tuple[float, float]] = []
    server = start_server(home, port, **settings)
    try:
        for n in range(rounds):
            while (held := leader_of(db, "lanner-supervisor")) is None or held[0] != server.process.pid:
                time.sleep(0.05)
            server.process.send_signal(signal.SIGKILL)
            server.process.wait()
            spawned = now(db)
            server = start_server(home, port, log_name=f"server-{n}.log", **settings)
            up = now(db) - spawned
            while (held := leader_of(db, "lanner-supervisor")) is None or held[0] != server.process.pid:
                time.sleep(0.05)
            times.append((held[1] - spawned, up))
    finally:
        server.stop()
        db.dispose()
        shutil.rmtree(home, ignore_errors=True)
    return times


def leader_of(db: Database, name: str) -> tuple[int, float] | None:
    """The pid holding ``name`` and when it took it."""
    with db.session() as session:
        row = session.execute(text("SELECT holder, acquired_at FROM leases WHERE name = :n"), {"n": name}).first()
    return (int(row[0].split(":")[1]), float(row[1])) if row else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lease", type=float, action="append", help="lease seconds (repeatable; default 15)")
    parser.add_argument("--serve-rounds", type=int, default=3, help="restarts of a real lanner serve (0: none)")
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
        cases = [("kill -9, three processes on three hosts", signal.SIGKILL, "own-host", 3),
                 ("kill -9, three processes on one host", signal.SIGKILL, "same-host", 3),
                 ("kill -9 and restart, one process on its host", signal.SIGKILL, "same-host", 1),
                 ("stop (SIGTERM), three hosts", signal.SIGTERM, "own-host", 3)]
        for lease in args.lease or [15.0]:
            for name, sig, hosts, count in cases:
                times = measure(db, url, lease, args.rounds, sig, hosts=hosts, count=count)
                rows.append(f"| {lease:g} s | {name} | {statistics.median(times):.1f} s | {min(times):.1f}–"
                            f"{max(times):.1f} s | {len(times)} |")
                print(rows[-1], flush=True)
        db.dispose()
        serve = measure_serve(cluster, (args.lease or [15.0])[0], args.serve_rounds) if args.serve_rounds else []
    finally:
        cluster.stop()
    section = (f"## {TITLE}\n\n`benchmarks/lease_takeover.py --rounds {args.rounds}` on {cpu_model()}, "
               f"{os.cpu_count()} cores, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, PostgreSQL 15 on the same machine: "
               "three processes (or one) run a "
               "loop with a pass every 0.5 s under one lease; the leader is stopped each round and a fresh process "
               "started in its place, and the time is from the signal to the first pass of its successor (both on "
               "the database's clock). \"On three hosts\": each process has a machine identity of its own, as on "
               "separate hosts (nobody can prove a holder dead); \"on one host\": the processes share this one.\n\n"
               "| `LANNER_LEASE_SECONDS` | leader | median | range | rounds |\n|---|---|---:|---:|---:|\n"
               + "\n".join(rows) + "\n\nA leader killed outright on another host is taken over once its lease "
               "expires: between the lease and a third more (its successor tries every third of the lease), less "
               "the part of the lease already run down when it died. On its own host it is provably dead (its pid "
               "is free), so the first process there to try takes over: the fresh process at its start, or a "
               "survivor at its next try; a restarted server's first try is at its start, so the time is the "
               "interpreter's start-up. A stopping server releases its leases, so another process leads within a "
               "third of the lease.")
    if serve:
        taken = [t for t, _ in serve]
        up = [u for _, u in serve]
        ahead = [u - t for t, u in serve]
        section += (f"\n\nA real `lanner serve` (PostgreSQL, lease {(args.lease or [15.0])[0]:g} s) killed with -9 "
                    f"and started again, {len(serve)} rounds: its supervisor's lease taken "
                    f"{statistics.median(taken):.1f} s after the spawn (median, {min(taken):.1f}–{max(taken):.1f} s), "
                    f"answering /api/health after {statistics.median(up):.1f} s ({min(up):.1f}–{max(up):.1f} s), so "
                    f"its loops led {statistics.median(ahead):.1f} s before it served its first request (median, "
                    f"{min(ahead):.1f}–{max(ahead):.1f} s): at its start, not a lease later (before: the lease "
                    "after the start-up). The start-up itself is importing the application on a shared machine. "
                    "`tests/test_e2e_lease_restart.py` checks it with an hour's lease.")
    print(section)
    if args.write:
        write_section(f"## {TITLE}", section)


if __name__ == "__main__":
    main()
