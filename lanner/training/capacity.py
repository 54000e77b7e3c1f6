"""How available each GPU type is right now, from the executor's free capacity: ``gpu-availability`` and the
``availability`` of every estimate."""

from __future__ import annotations

from lanner.gpus.catalogue import Catalogue
from lanner.training.executors import Executor


def availability_now(executor: Executor, catalogue: Catalogue) -> dict[str, str | None]:
    """High / Medium / Low per offered GPU type; None where no device of the type exists here."""
    capacity = executor.capacity()
    out: dict[str, str | None] = {}
    for gpu in catalogue.offered():
        room = capacity.get(gpu.id)
        out[gpu.id] = availability_level(room.free, room.total) if room and room.total else None
    return out


def availability_level(free: int, total: int) -> str:
    if free <= 0:
        return "Low"
    return "High" if free >= max(1, total) / 2 else "Medium"
