"""Free training slots where Lanner counts them (an executor that does not queue jobs itself: the local one),
for the supervisor's dispatch.

The executor knows only the workers it launched or has polled since this server process started; the database
also knows workers launched before a restart, ones whose status cannot be read, and other processes' claims. So
a slot is free only when both say so, and the database's count is read again for each claim under a lock every
server process shares (``lanner.db.leases.shared_lock``): each claim commits before its lock is released, so
the next process to count sees it, and no two processes fill the same slot (``LANNER_LOCAL_MAX_RUNS`` holds
across ``lanner serve --workers N``; measured before: three processes dispatching in the same 0.3 s ran four
CPU trainers with a limit of two). The count is the database's, so the limit is the cluster's, not each host's:
the local executor's runs start on the host whose process leads the supervisor, and with two hosts of two
processes each, eight runs started at once still run two at a time (tests/test_e2e_cluster.py; docs/deploy.md
says what a lease moving between hosts does to runs in flight)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.db import Database
from lanner.db.leases import shared_lock
from lanner.training.capacity import busy_in_database, holding_devices
from lanner.training.executors import Executor
from lanner.training.models import Run


def capacity(db: Database, executor: Executor) -> dict[str, Any]:
    """Free slots per GPU type for this pass: the executor's count, never more than the database allows."""
    capacity = dict(executor.capacity())
    with db.session() as session:
        busy: dict[str, int] = {}
        for gpu_type, devices in busy_in_database(session, executor.name).items():
            busy[gpu_type or "cpu"] = busy.get(gpu_type or "cpu", 0) + devices
    for gpu_type, room in capacity.items():
        free = min(room.free, room.total - busy.get(gpu_type, 0))
        capacity[gpu_type] = type(room)(total=room.total, free=max(0, free))
    return capacity


def room(session: Session, executor: Executor, capacity: dict[str, Any], gpu_type: str) -> int:
    """Free devices of ``gpu_type`` for the claim ``session`` is about to make, counted under the shared lock
    (held until that transaction commits the claim). ``capacity``: this pass's ``capacity``, less what it
    launched since."""
    room = capacity.get(gpu_type)
    if room is None:
        return 0
    shared_lock(session, f"lanner-supervisor:capacity:{executor.name}")
    busy = session.scalar(select(func.coalesce(func.sum(Run.gpu_count), 0)).where(
        *holding_devices(executor.name), func.coalesce(Run.gpu_type, "cpu") == gpu_type))
    return min(room.free, room.total - int(busy or 0))
