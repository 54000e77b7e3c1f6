"""The hot path of the training protocol, shaped for group commit.

``epoch_end``, ``console_output``, ``system_metrics`` and ``training_progress`` are most of the traffic. Their
rows are not written one statement per event: each event appends parameters to ``PendingWrites``, and the
batch writes them with one ``executemany`` per statement, in arrival order. Lookups are prefetched for the
whole batch (owner of each model, the run each event reports into) with one query each. Everything runs as
Core statements on the session's connection: for a few small rows the ORM's machinery costs more than the SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Float, bindparam, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.projects.models import ModelRecord
from lanner.training.models import ConsoleChunk, EpochMetric, Run, SystemMetric

HOT_EVENTS = frozenset({"epoch_end", "console_output", "system_metrics", "training_progress"})

_MODELS = ModelRecord.__table__
_RUNS = Run.__table__
_RUN_COLUMNS = (_RUNS.c.id, _RUNS.c.model_id, _RUNS.c.status, _RUNS.c.termination_reason, _RUNS.c.epochs)
_RUN_BY_ID = select(*_RUN_COLUMNS).where(_RUNS.c.id == bindparam("run_id"))
_LATEST_RUN = select(*_RUN_COLUMNS).where(_RUNS.c.model_id == bindparam("model_id")).order_by(
    _RUNS.c.id.desc()).limit(1)
_MODEL_OWNER = select(_MODELS.c.owner_id).where(_MODELS.c.id == bindparam("model_id"))
_SYSTEM_INSERT = insert(SystemMetric.__table__)
_MODEL_METRICS_UPDATE = (
    update(_MODELS).where(_MODELS.c.id == bindparam("b_id"))
    .values(metrics=bindparam("b_metrics"), updated_at=bindparam("b_now"),
            best_fitness=func.coalesce(bindparam("b_best", type_=Float), _MODELS.c.best_fitness))
)


def _insert_for(dialect_name: str) -> Any:
    return (postgresql if dialect_name == "postgresql" else sqlite).insert


@lru_cache(maxsize=8)
def epoch_upsert(dialect_name: str) -> Any:
    """A retried or resumed epoch replaces its row. Built once per dialect: building ``excluded`` per event
    cost more than the insert."""
    stmt = _insert_for(dialect_name)(EpochMetric.__table__)
    return stmt.on_conflict_do_update(
        index_elements=["model_id", "epoch"],
        set_={k: stmt.excluded[k] for k in ("run_id", "metrics", "fitness", "system", "created_at")},
    )


@lru_cache(maxsize=8)
def console_insert(dialect_name: str) -> Any:
    return _insert_for(dialect_name)(ConsoleChunk.__table__).on_conflict_do_nothing(
        index_elements=["model_id", "chunk_id"])


@dataclass
class RunRef:
    """The few run fields the hot path reads."""

    id: int
    model_id: str
    status: str
    termination_reason: str | None
    epochs: int | None


class PendingWrites:
    """Rows of hot events, written together by ``flush`` (order within each statement is arrival order)."""

    def __init__(self) -> None:
        self.epochs: list[dict[str, Any]] = []
        self.model_metrics: dict[str, dict[str, Any]] = {}
        self.systems: list[dict[str, Any]] = []
        self.console: list[dict[str, Any]] = []
        self.seen_runs: set[int] = set()

    def add_epoch(self, *, model_id: str, run_id: int, epoch: int, metrics: dict[str, Any], fitness: float | None,
                  best_fitness: float | None, system: dict[str, Any] | None) -> None:
        now = utcnow()
        self.epochs.append({"model_id": model_id, "run_id": run_id, "epoch": epoch, "metrics": metrics,
                            "fitness": fitness, "system": system, "created_at": now})
        self.set_model_metrics(model_id, metrics, best_fitness)
        if system:
            self.add_system(run_id=run_id, data=system)

    def set_model_metrics(self, model_id: str, metrics: dict[str, Any], best_fitness: float | None) -> None:
        """The model shows its latest metrics: within a batch only the last event per model needs writing."""
        previous = self.model_metrics.pop(model_id, None)
        if best_fitness is None and previous is not None:
            best_fitness = previous["b_best"]
        self.model_metrics[model_id] = {"b_id": model_id, "b_metrics": metrics, "b_now": utcnow(),
                                        "b_best": best_fitness}

    def add_system(self, *, run_id: int, data: dict[str, Any]) -> None:
        self.systems.append({"run_id": run_id, "data": data, "created_at": utcnow()})

    def add_console(self, *, model_id: str, run_id: int, chunk_id: int, content: str, line_count: int) -> None:
        self.console.append({"model_id": model_id, "run_id": run_id, "chunk_id": chunk_id, "content": content,
                             "line_count": line_count, "created_at": utcnow()})

    def flush(self, session: Session) -> None:
        connection = session.connection()
        dialect = connection.dialect.name
        for statement, rows in ((epoch_upsert(dialect), self.epochs), (_SYSTEM_INSERT, self.systems),
                                (console_insert(dialect), self.console)):
            if rows:
                connection.execute(statement, rows)
                rows.clear()
        if self.model_metrics:
            connection.execute(_MODEL_METRICS_UPDATE, list(self.model_metrics.values()))
            self.model_metrics.clear()
        if self.seen_runs:
            connection.execute(update(_RUNS).where(_RUNS.c.id.in_(sorted(self.seen_runs)))
                               .values(last_event_at=utcnow()))
            self.seen_runs.clear()


class Lookups:
    """Owners and runs for the events of a batch, fetched in one query each. Dropped whenever an event that
    can change them (a start, a completion, a failure) is applied, after which lookups go to the database."""

    def __init__(self) -> None:
        self.owners: dict[str, str] = {}
        self.latest_runs: dict[str, RunRef] = {}
        self.runs: dict[int, RunRef] = {}

    def clear(self) -> None:
        self.owners.clear()
        self.latest_runs.clear()
        self.runs.clear()

    def prefetch(self, session: Session, model_ids: Iterable[str], run_ids: Iterable[int]) -> None:
        model_ids, run_ids = sorted(set(model_ids)), sorted(set(run_ids))
        if not model_ids and not run_ids:
            return
        connection = session.connection()
        if model_ids:
            rows = connection.execute(select(_MODELS.c.id, _MODELS.c.owner_id).where(_MODELS.c.id.in_(model_ids)))
            self.owners.update({row.id: row.owner_id for row in rows})
            latest = select(func.max(_RUNS.c.id)).where(_RUNS.c.model_id.in_(model_ids)).group_by(_RUNS.c.model_id)
            for row in connection.execute(select(*_RUN_COLUMNS).where(_RUNS.c.id.in_(latest))):
                self.latest_runs[row.model_id] = self.runs[row.id] = RunRef(*row)
        missing = [r for r in run_ids if r not in self.runs]
        if missing:
            for row in connection.execute(select(*_RUN_COLUMNS).where(_RUNS.c.id.in_(missing))):
                self.runs[row.id] = RunRef(*row)

    def owner(self, session: Session, model_id: str) -> str | None:
        if model_id not in self.owners:
            return session.connection().execute(_MODEL_OWNER, {"model_id": model_id}).scalar()
        return self.owners[model_id]

    def run_by_id(self, session: Session, run_id: int) -> RunRef | None:
        if run_id in self.runs:
            return self.runs[run_id]
        row = session.connection().execute(_RUN_BY_ID, {"run_id": run_id}).first()
        return RunRef(*row) if row else None

    def latest_run(self, session: Session, model_id: str) -> RunRef | None:
        if model_id in self.latest_runs:
            return self.latest_runs[model_id]
        row = session.connection().execute(_LATEST_RUN, {"model_id": model_id}).first()
        return RunRef(*row) if row else None


class BatchState:
    """What the events of one transaction share."""

    def __init__(self) -> None:
        self.writes = PendingWrites()
        self.lookups = Lookups()

    def prefetch(self, session: Session, bodies: Iterable[Any]) -> None:
        model_ids, run_ids = [], []
        for body in bodies:
            if body.event in HOT_EVENTS and body.modelId:
                model_ids.append(body.modelId)
                run_id = body.data.get("runId")
                if isinstance(run_id, int) and not isinstance(run_id, bool):
                    run_ids.append(run_id)
        self.lookups.prefetch(session, model_ids, run_ids)

    def before_state_change(self, session: Session) -> None:
        """Called before an event that reads or changes models and runs through the ORM: write what is pending
        first (so order is kept) and forget lookups that may become stale."""
        self.writes.flush(session)
        self.lookups.clear()

    def finish(self, session: Session) -> None:
        self.writes.flush(session)
