"""The hot path of the training protocol, shaped for group commit.

``epoch_end``, ``console_output``, ``system_metrics`` and ``training_progress`` are most of the traffic. Their
rows are not written one statement per event: each event appends parameters to ``PendingWrites``, and the
batch writes them with one ``executemany`` per statement, in arrival order. Lookups are prefetched for the
whole batch (each model's owner and latest run) with one query. The statements are plain SQL run on the
driver's cursor of the session's connection (``HotSql``): for a few small rows, SQLAlchemy's per-statement and
per-value work (compiling, caching, bind processors) cost more than SQLite's own (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from lanner.bounds import INT32_MAX
from lanner.db import utcnow
from lanner.projects.models import ModelRecord
from lanner.training.models import ConsoleChunk, EpochMetric, Run, SystemMetric

HOT_EVENTS = frozenset({"epoch_end", "console_output", "system_metrics", "training_progress"})
# How stale a run's ``last_event_at`` may be: it tells a silent run (lost after LANNER_RUN_LOST_AFTER_SECONDS,
# minutes) from a live one and shows as its job's ``updatedAt``. Written at most this often per run, not in every
# batch: under webhook load the run rows rewritten per commit were a sixth of the pages each commit wrote.
HEARD_RESOLUTION = timedelta(seconds=1)

_MODELS = ModelRecord.__table__
_RUNS = Run.__table__
_EPOCHS = EpochMetric.__table__
_CONSOLE = ConsoleChunk.__table__
_SYSTEMS = SystemMetric.__table__
_RUN_COLUMNS = (_RUNS.c.id, _RUNS.c.model_id, _RUNS.c.status, _RUNS.c.termination_reason, _RUNS.c.epochs,
                _RUNS.c.last_event_at)
_RUN_BY_ID = select(*_RUN_COLUMNS).where(_RUNS.c.id == bindparam("run_id"))
_LATEST_RUN = select(*_RUN_COLUMNS).where(_RUNS.c.model_id == bindparam("model_id")).order_by(
    _RUNS.c.id.desc()).limit(1)
_MODEL_OWNER = select(_MODELS.c.owner_id).where(_MODELS.c.id == bindparam("model_id"))
_STORED_METRICS = select(_EPOCHS.c.metrics).where(_EPOCHS.c.model_id == bindparam("model_id"),
                                                   _EPOCHS.c.epoch == bindparam("epoch"))


def _json(value: Any) -> str:
    """What the JSON columns' serializer (``lanner.db``) writes: Python None is JSON ``null``, as SQLAlchemy
    stores it."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _sqlite_time(value: datetime) -> str:
    """A UTC datetime as SQLAlchemy's SQLite DATETIME stores it (``2026-12-05 15:42:29.123456``)."""
    return value.replace(tzinfo=None).isoformat(" ", "microseconds")


class HotSql:
    """The hot statements of one dialect as driver SQL, built once from the tables (SQLite and PostgreSQL take
    the same SQL but for the placeholder; datetimes go to SQLite as its DATETIME text, to PostgreSQL as they
    are). Run on ``driver_cursor(session)``, inside the session's transaction."""

    def __init__(self, dialect: Any) -> None:
        quote = dialect.identifier_preparer.quote
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        self.mark = mark
        self.time = _sqlite_time if dialect.name == "sqlite" else (lambda value: value)

        def insert(table: Any, columns: tuple[str, ...], tail: str) -> str:
            return (f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) "
                    f"VALUES ({', '.join([mark] * len(columns))}) {tail}")

        replaced = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in ("run_id", "metrics", "fitness", "system",
                                                                              "created_at"))
        # A retried or resumed epoch replaces its row.
        self.epoch = insert(_EPOCHS, ("model_id", "run_id", "epoch", "metrics", "fitness", "system", "created_at"),
                            f"ON CONFLICT ({quote('model_id')}, {quote('epoch')}) DO UPDATE SET {replaced}")
        self.console = insert(_CONSOLE, ("model_id", "run_id", "chunk_id", "content", "line_count", "created_at"),
                              f"ON CONFLICT ({quote('model_id')}, {quote('chunk_id')}) DO NOTHING")
        self.system = insert(_SYSTEMS, ("run_id", "data", "created_at"), "")
        models, best = quote(_MODELS.name), quote("best_fitness")
        self.model_metrics = (f"UPDATE {models} SET {quote('metrics')} = {mark}, {quote('updated_at')} = {mark}, "
                              f"{best} = COALESCE(CAST({mark} AS DOUBLE PRECISION), {best}) "
                              f"WHERE {quote('id')} = {mark}")
        runs = quote(_RUNS.name)
        self.runs_heard = f"UPDATE {runs} SET {quote('last_event_at')} = {mark} WHERE {quote('id')} IN "
        run_columns = ", ".join(f"r.{quote(c.name)}" for c in _RUN_COLUMNS)
        # Each model's owner and latest run, in one query.
        self.owners_and_latest_runs = (
            f"SELECT m.{quote('id')}, m.{quote('owner_id')}, {run_columns} FROM {models} m LEFT JOIN {runs} r "
            f"ON r.{quote('id')} = (SELECT MAX(l.{quote('id')}) FROM {runs} l WHERE l.{quote('model_id')} = "
            f"m.{quote('id')}) WHERE m.{quote('id')} IN ")
        self.runs_by_id = f"SELECT {run_columns} FROM {runs} r WHERE r.{quote('id')} IN "
        # Stored epochs' metrics (as JSON text on both databases), by models and epoch numbers.
        self.stored_epochs = (f"SELECT {quote('model_id')}, {quote('epoch')}, CAST({quote('metrics')} AS TEXT) "
                              f"FROM {quote(_EPOCHS.name)} WHERE {quote('model_id')} IN ")
        self.and_epoch_in = f" AND {quote('epoch')} IN "

    def marks(self, count: int) -> str:
        return f"({', '.join([self.mark] * count)})"


@lru_cache(maxsize=8)
def _hot_sql(dialect: Any) -> HotSql:
    return HotSql(dialect)


def driver_cursor(session: Session) -> tuple[Any, HotSql]:
    """The DB-API cursor of the session's connection (its transaction begun) and the dialect's statements."""
    connection = session.connection()
    return connection.connection.driver_connection.cursor(), _hot_sql(connection.dialect)


def has_validation_losses(metrics: Any) -> bool:
    """Only the validation during training reports ``val/`` losses (the final evaluation does not)."""
    return isinstance(metrics, dict) and any(str(k).startswith("val/") for k in metrics)


@dataclass
class RunRef:
    """The few run fields the hot path reads."""

    id: int
    model_id: str
    status: str
    termination_reason: str | None
    epochs: int | None
    last_event_at: datetime | str | None = None  # as its query returned it (SQLite's driver gives text)

    def heard_within(self, period: timedelta, now: datetime) -> bool:
        heard = self.last_event_at
        if heard is None:
            return False
        if isinstance(heard, str):
            heard = datetime.fromisoformat(heard)
        if heard.tzinfo is None:
            heard = heard.replace(tzinfo=UTC)
        return now - heard < period


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
        # The epoch's system reading stays in its epoch row only: copying it into system_metrics as well cost
        # a third of the writer's time per event (a row and an index entry per run). Readers of the system
        # timeline read both tables (``dashboard.system_latest``, ``learn.peak_gpu_memory_gb``).

    def heard(self, run: RunRef) -> None:
        """``run`` reported: its ``last_event_at`` becomes the commit's time, unless it is recent enough."""
        if run.id not in self.seen_runs and not run.heard_within(HEARD_RESOLUTION, utcnow()):
            self.seen_runs.add(run.id)

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
        if not (self.epochs or self.systems or self.console or self.model_metrics or self.seen_runs):
            return
        cursor, sql = driver_cursor(session)
        stamp = sql.time
        try:
            if self.epochs:
                cursor.executemany(sql.epoch, [
                    (r["model_id"], r["run_id"], r["epoch"], _json(r["metrics"]), r["fitness"], _json(r["system"]),
                     stamp(r["created_at"])) for r in self.epochs])
                self.epochs.clear()
            if self.systems:
                cursor.executemany(sql.system, [(r["run_id"], _json(r["data"]), stamp(r["created_at"]))
                                                for r in self.systems])
                self.systems.clear()
            if self.console:
                cursor.executemany(sql.console, [
                    (r["model_id"], r["run_id"], r["chunk_id"], r["content"], r["line_count"],
                     stamp(r["created_at"])) for r in self.console])
                self.console.clear()
            if self.model_metrics:
                cursor.executemany(sql.model_metrics, [
                    (_json(r["b_metrics"]), stamp(r["b_now"]), r["b_best"], r["b_id"])
                    for r in self.model_metrics.values()])
                self.model_metrics.clear()
            if self.seen_runs:
                runs = sorted(self.seen_runs)
                cursor.execute(sql.runs_heard + sql.marks(len(runs)), (stamp(utcnow()), *runs))
                self.seen_runs.clear()
        finally:
            cursor.close()


class Lookups:
    """Owners and runs for the events of a batch, fetched in one query each. Dropped whenever an event that
    can change them (a start, a completion, a failure) is applied, after which lookups go to the database."""

    def __init__(self) -> None:
        self.owners: dict[str, str] = {}
        self.latest_runs: dict[str, RunRef] = {}
        self.runs: dict[int, RunRef] = {}
        self.stored: dict[tuple[str, int], dict[str, Any] | None] = {}  # (model, epoch) -> its stored metrics

    def clear(self) -> None:
        self.owners.clear()
        self.latest_runs.clear()
        self.runs.clear()
        self.stored.clear()

    def prefetch(self, session: Session, model_ids: Iterable[str], run_ids: Iterable[int],
                 stored_epochs: Iterable[tuple[str, int]] = ()) -> None:
        model_ids, run_ids, stored_epochs = sorted(set(model_ids)), sorted(set(run_ids)), set(stored_epochs)
        if not model_ids and not run_ids:
            return
        cursor, sql = driver_cursor(session)
        try:
            if model_ids:
                cursor.execute(sql.owners_and_latest_runs + sql.marks(len(model_ids)), model_ids)
                for model, owner, *run in cursor.fetchall():
                    self.owners[model] = owner
                    if run[0] is not None:
                        self.latest_runs[model] = self.runs[run[0]] = RunRef(*run)
            missing = [r for r in run_ids if r not in self.runs]
            if missing:
                cursor.execute(sql.runs_by_id + sql.marks(len(missing)), missing)
                for row in cursor.fetchall():
                    self.runs[row[0]] = RunRef(*row)
            if stored_epochs:
                self.stored.update(dict.fromkeys(stored_epochs))  # what the query does not return is not stored
                models, epochs = sorted({m for m, _ in stored_epochs}), sorted({e for _, e in stored_epochs})
                cursor.execute(sql.stored_epochs + sql.marks(len(models)) + sql.and_epoch_in + sql.marks(len(epochs)),
                               (*models, *epochs))
                for model, epoch, metrics in cursor.fetchall():
                    if (model, epoch) in stored_epochs:
                        self.stored[(model, epoch)] = orjson.loads(metrics) if metrics is not None else None
        finally:
            cursor.close()

    def stored_metrics(self, session: Session, model_id: str, epoch: int) -> dict[str, Any] | None:
        """The metrics stored for ``model_id``'s ``epoch`` (committed, not pending), None without a row."""
        if (model_id, epoch) in self.stored:
            return self.stored[(model_id, epoch)]
        return session.connection().execute(_STORED_METRICS, {"model_id": model_id, "epoch": epoch}).scalar()

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
        model_ids, run_ids, stored_epochs = [], [], []
        for body in bodies:
            if body.event in HOT_EVENTS and body.modelId:
                model_ids.append(body.modelId)
                run_id = body.data.get("runId")
                if isinstance(run_id, int) and not isinstance(run_id, bool):
                    run_ids.append(run_id)
                if body.event == "epoch_end" and not has_validation_losses(body.data.get("metrics")):
                    # Telling its epoch from the final evaluation reads the epoch before (protocol): fetched for
                    # the whole batch here rather than one query per event (a run with val=False sends these).
                    epoch = body.data.get("epoch")
                    if isinstance(epoch, int) and not isinstance(epoch, bool) and 0 < epoch <= INT32_MAX:
                        stored_epochs.append((body.modelId, epoch - 1))
        self.lookups.prefetch(session, model_ids, run_ids, stored_epochs)

    def before_state_change(self, session: Session) -> None:
        """Called before an event that reads or changes models and runs through the ORM: write what is pending
        first (so order is kept) and forget lookups that may become stale."""
        self.writes.flush(session)
        self.lookups.clear()

    def finish(self, session: Session) -> None:
        self.writes.flush(session)
