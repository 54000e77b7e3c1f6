"""How available each GPU type is right now, from the executor's free capacity: ``gpu-availability`` and the
``availability`` of every estimate."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.gpus.catalogue import Catalogue
from lanner.training.executors import Executor
from lanner.training.models import Run

# What a person reads for each level (the API's High / Medium / Low, null where no device of the type exists).
AVAILABILITY_TEXT = {"High": "free now", "Medium": "free now", "Low": "all busy", None: "none here"}


def availability_now(executor: Executor, catalogue: Catalogue,
                     busy: Mapping[str, int] | None = None) -> dict[str, str | None]:
    """High / Medium / Low per offered GPU type; None where no device of the type exists here. ``busy``: workers
    per type that the database knows of (``busy_in_database``), for a process that launched none itself."""
    capacity = executor.capacity()
    out: dict[str, str | None] = {}
    for gpu in catalogue.offered():
        room = capacity.get(gpu.id)
        if not room or not room.total:
            out[gpu.id] = None
            continue
        free = min(room.free, room.total - int((busy or {}).get(gpu.id, 0)))
        out[gpu.id] = availability_level(free, room.total)
    return out


def runnable_types(executor: Executor, levels: Mapping[str, str | None]) -> set[str]:
    """The GPU types a run can start on now, from ``availability_now``'s levels: those a device here has (level
    not None); where none has (a Ray cluster with no node yet), those the executor would queue."""
    return {gpu for gpu, level in levels.items() if level is not None} or {
        gpu for gpu in levels if executor.offers(gpu)}


def busy_in_database(session: Session, executor_name: str) -> dict[str, int]:
    """Launched workers per GPU type not yet known to be gone: what any process (the CLI, another server) knows
    of runs it did not launch."""
    return {gpu_type: int(count) for gpu_type, count in session.execute(
        select(Run.gpu_type, func.count()).where(Run.executor == executor_name, Run.external_id.is_not(None),
                                                 Run.worker_exited_at.is_(None)).group_by(Run.gpu_type)).all()}


def availability_text(level: str | None) -> str:
    return AVAILABILITY_TEXT.get(level, str(level).lower())


def availability_level(free: int, total: int) -> str:
    if free <= 0:
        return "Low"
    return "High" if free >= max(1, total) / 2 else "Medium"
