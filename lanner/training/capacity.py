"""How available each GPU type is right now, in the words everything says it with: ``gpu-availability``, the
``availability`` of every estimate, the train dialog, ``lanner estimate``.

- **free now**: a device of the type is up and idle here;
- **on demand, about N min**: none is free, but its pool (``LANNER_POOLS``) can bring up a node; N is the
  pool's measured start time (``provisioning.typical_start_seconds``), and an estimate adds it to the wait;
- **queued behind K runs** (or **queued: all busy**): every device the type can ever have here is busy; K runs
  wait ahead of a new one;
- **not offered**: no device of the type is here and no pool can bring one.

The SDK's answer keeps the hosted vocabulary (``High`` / ``Medium`` / ``Low`` / null): free now is High or
Medium by how much is free, on demand is Medium, queued is Low, not offered is null."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.gpus.advisor import guidance
from lanner.gpus.catalogue import Catalogue
from lanner.gpus.estimator import Option, Range, recommend
from lanner.training.executors import Executor
from lanner.training.models import Run
from lanner.training.provisioning import typical_start_seconds
from lanner.training.state import RunStatus


@dataclass(frozen=True)
class Availability:
    level: str | None  # High / Medium / Low / None, as the SDK's gpu_availability answers
    text: str
    startup_seconds: float | None = None  # before training starts: 0 when free now, the pool's start on demand
    queued_behind: int = 0

    def as_json(self) -> dict[str, object]:
        return {"level": self.level, "text": self.text, "startupSeconds": self.startup_seconds,
                "queuedBehind": self.queued_behind}


NOT_OFFERED = Availability(None, "not offered")


def availability(session: Session, executor: Executor, catalogue: Catalogue) -> dict[str, Availability]:
    """Every offered GPU type's availability: the executor's free devices, the runs the database knows are on
    them (any process's, launched before a restart too), the runs waiting, and the pools that can grow."""
    capacity = executor.capacity()
    pools = executor.pools
    busy = busy_in_database(session, executor.name)
    waiting = waiting_in_database(session)
    out: dict[str, Availability] = {}
    for gpu in catalogue.offered():
        room = capacity.get(gpu.id)
        total = room.total if room else 0
        free = min(room.free, total - busy.get(gpu.id, 0)) if room else 0
        pool = pools.for_gpu(gpu.id)
        behind, behind_gpus = waiting.get(gpu.id, (0, 0))
        if free > 0 and not behind:
            out[gpu.id] = Availability(availability_level(free, total), "free now", 0.0)
        elif pool is not None and busy.get(gpu.id, 0) + behind_gpus < max(pool.slots, total):
            start, _ = typical_start_seconds(session, pool)
            out[gpu.id] = Availability("Medium", f"on demand, about {max(1, round(start / 60))} min", start)
        elif total or pool is not None:
            words = f"queued behind {behind} run{'s' if behind != 1 else ''}" if behind else "queued: all busy"
            out[gpu.id] = Availability("Low", words, None, behind)
        elif not len(pools) and executor.offers(gpu.id):
            out[gpu.id] = Availability(None, "no node yet")  # a Ray cluster without pools: a node may join
        else:
            out[gpu.id] = NOT_OFFERED
    return out


def levels(found: dict[str, Availability]) -> dict[str, str | None]:
    """The SDK's ``gpu_availability`` answer."""
    return {gpu: entry.level for gpu, entry in found.items()}


def runnable_types(executor: Executor, found: dict[str, Availability]) -> set[str]:
    """The GPU types a run can start on (now, on demand or after a queue); where none can (a Ray cluster with
    no node yet and no pools), those the executor would queue."""
    return {gpu for gpu, entry in found.items() if entry.level is not None} or {
        gpu for gpu in found if executor.offers(gpu)}


def _picks_here(result: dict[str, Any], runnable: set[str], *, deadline_minutes: float | None,
               budget_cents: float | None) -> dict[str, Any]:
    """The advisor's picks among the types that can run here (a type no worker or pool here has cannot be started,
    so it is neither recommended nor pre-selected), ranked by the time a person waits: training plus the start-up
    of a node brought up on demand (``add_availability``'s ``doneInSeconds``). What the estimate API, the train
    dialog and ``lanner estimate`` recommend."""
    options = [Option(e["gpuType"], e["displayName"], e["pricePerHour"], e["fits"],
                      e["allowed"] and e["gpuType"] in runnable,
                      Range(**(e.get("doneInSeconds") or e["totalSeconds"])), Range(**e["costCents"]))
               for e in result["estimates"]]
    return recommend(options, deadline_s=deadline_minutes * 60 if deadline_minutes is not None else None,
                     budget_cents=budget_cents)


def recommend_here(result: dict[str, Any], runnable: set[str], *, deadline_minutes: float | None,
                   budget_cents: float | None) -> dict[str, Any]:
    """An estimate's recommendation narrowed to the types that run here (``_picks_here``), and its rule-of-thumb
    guidance asked again for that pick, so neither names a type nobody here can start. Returns the picks."""
    result["recommendation"] = _picks_here(result, runnable, deadline_minutes=deadline_minutes,
                                          budget_cents=budget_cents)
    if "guidance" in result:
        result["guidance"] = guidance(result["images"]["train"], result["recommendation"], result["estimates"])
    return result["recommendation"]


def busy_in_database(session: Session, executor_name: str) -> dict[str, int]:
    """GPUs per type held by launched workers not yet known to be gone: what any process (the CLI, another
    server) knows of runs it did not launch. Counted in GPUs, as the executor's capacity is: a run on two GPUs
    holds two."""
    return {gpu_type: int(count) for gpu_type, count in session.execute(
        select(Run.gpu_type, func.sum(Run.gpu_count)).where(*holding_devices(executor_name))
        .group_by(Run.gpu_type)).all()}


def holding_devices(executor_name: str) -> tuple[Any, ...]:
    """The runs whose workers on ``executor_name`` may hold devices: launched (or claimed) and not yet seen gone."""
    return Run.executor == executor_name, Run.external_id.is_not(None), Run.worker_exited_at.is_(None)


def waiting_in_database(session: Session) -> dict[str, tuple[int, int]]:
    """Runs and the GPUs they ask for, per GPU type, waiting to be launched (pending, no worker yet): people
    are told how many runs they queue behind; a pool's room is counted in GPUs."""
    return {gpu_type: (int(runs), int(gpus)) for gpu_type, runs, gpus in session.execute(
        select(Run.gpu_type, func.count(), func.sum(Run.gpu_count)).where(
            Run.executor.is_not(None), Run.external_id.is_(None),
            Run.status == RunStatus.PENDING.value).group_by(Run.gpu_type)).all()}


def availability_level(free: int, total: int) -> str:
    if free <= 0:
        return "Low"
    return "High" if free >= max(1, total) / 2 else "Medium"


def add_availability(item: dict[str, Any], entry: Availability | None) -> None:
    """An estimate item's availability (Lanner fields beside the SDK-style level): its words, the start-up time
    before training starts, and ``doneInSeconds``, the training time plus that start-up (what the person waits)."""
    entry = entry or NOT_OFFERED
    item["availability"] = entry.level
    item["availabilityText"] = entry.text
    item["startupSeconds"] = entry.startup_seconds
    total = item.get("totalSeconds")
    if isinstance(total, dict) and entry.startup_seconds is not None:
        item["doneInSeconds"] = {key: value + entry.startup_seconds for key, value in total.items()
                                 if isinstance(value, int | float)}
    else:
        item["doneInSeconds"] = None
