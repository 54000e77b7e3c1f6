"""Group commit (``training/group_commit.py``) with many events in flight at once, as a busy server gets them: the
shared transaction is reached, every acknowledged event is stored, each epoch once, a bad event fails alone, a
failed shared commit falls back to one transaction per event, and each answer reaches its own caller.

The writer is held on its first batch until every event is queued (no timing involved), so the next batch is
known to hold them all."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.db import utcnow
from lanner.errors import NotFound, Unprocessable
from lanner.training import dashboard, writes
from lanner.training.models import EpochMetric, Run, SystemMetric
from lanner.training.schemas import MetricsEvent
from lanner.training.writes import BatchState
from tests.test_protocol import METRICS, start


def principal_of(app: Any, key: str) -> Principal:
    with app.state.lanner.db.session() as session:
        return accounts_service.authenticate_key(session, key=key, cache={}, ttl=0)


def epoch_event(model_id: str, epoch: int, **data: Any) -> MetricsEvent:
    return MetricsEvent(event="epoch_end", modelId=model_id, data={
        "epoch": epoch, "metrics": {**METRICS, "lr": 0.001 * epoch}, "system": {"cpu": 10.0 + epoch},
        "fitness": 0.01 * epoch, "best_fitness": 0.01 * epoch, **data})


def submit_all(app: Any, monkeypatch: pytest.MonkeyPatch,
               events: list[tuple[Principal, MetricsEvent]]) -> tuple[list[Any], list[int]]:
    """Submit every event at once; returns each one's outcome (answer or exception) and the batch sizes."""
    writer = app.state.training.writer
    original = writer._process
    sizes: list[int] = []
    gate = threading.Event()

    def held(batch: list[Any]) -> None:
        sizes.append(len(batch))
        gate.wait(timeout=60)  # only the first batch waits: the gate stays open after
        original(batch)

    monkeypatch.setattr(writer, "_process", held)

    async def main() -> list[Any]:
        tasks = [asyncio.ensure_future(writer.submit(principal, body)) for principal, body in events]
        await asyncio.sleep(0)  # one pass of the loop: every task has queued its event and awaits its answer
        gate.set()
        return await asyncio.gather(*tasks, return_exceptions=True)

    return asyncio.run(main()), sizes


def stored(app: Any, model_id: str) -> list[int]:
    with app.state.lanner.db.session() as session:
        return list(session.scalars(select(EpochMetric.epoch).where(EpochMetric.model_id == model_id)
                                    .order_by(EpochMetric.epoch)))


def test_events_of_many_runs_in_flight_together_are_each_stored_once(app, client, sdk, alice, monkeypatch):
    platform = sdk(alice)
    runs = [start(platform, name=f"run-{i}", epochs=1000) for i in range(6)]
    principal = principal_of(app, alice.key)
    events = [(principal, epoch_event(run["modelId"], epoch)) for epoch in range(25) for run in runs]
    events += [(principal, MetricsEvent(event="console_output", modelId=run["modelId"],
                                        data={"chunkId": 1000 + i, "content": f"line {i}\n", "lineCount": 1}))
               for i in range(3) for run in runs]
    outcomes, sizes = submit_all(app, monkeypatch, events)

    assert max(sizes) > 1, sizes  # group commit is reached: one transaction served several events
    for (_, body), outcome in zip(events, outcomes, strict=True):
        assert not isinstance(outcome, BaseException), outcome
        run = next(r for r in runs if r["modelId"] == body.modelId)
        assert outcome == {"received": True, "event": body.event, "modelId": run["modelId"], "runId": run["runId"]}
    for run in runs:
        assert stored(app, run["modelId"]) == list(range(25))
        model = platform.models.retrieve("alice", "shapes", run["modelSlug"])["model"]
        assert [r["epoch"] for r in model["trainResults"]] == list(range(25))
        assert [c["content"] for c in model["consoleChunks"]] == [f"line {i}\n" for i in range(3)]
        assert model["status"] == "running"
    with app.state.lanner.db.session() as session:
        # Each epoch's system reading is kept once, in its epoch row, and read from there.
        assert session.scalar(select(func.count()).select_from(SystemMetric)) == 0
        for run in runs:
            assert dashboard.system_latest(session, session.get(Run, run["runId"]))["cpu"] == 10.0 + 24


def test_a_bad_event_fails_alone_and_its_batch_is_kept(app, client, sdk, alice, bob, monkeypatch):
    platform = sdk(alice)
    mine = start(platform, name="mine", epochs=1000)["modelId"]
    theirs = start(sdk(bob), project="bob/p", name="theirs", epochs=1000)["modelId"]
    me = principal_of(app, alice.key)
    events = [(me, epoch_event(mine, 0)), (me, epoch_event(theirs, 0)),  # not alice's: 404, like a missing model
              (me, epoch_event(mine, 1)), (me, MetricsEvent(event="epoch_end", modelId=mine, data={"epoch": -1})),
              (me, epoch_event("no-such-model", 0)), (me, epoch_event(mine, 2))]
    outcomes, _ = submit_all(app, monkeypatch, events)

    assert [type(o) for o in outcomes] == [dict, NotFound, dict, Unprocessable, NotFound, dict]
    assert stored(app, mine) == [0, 1, 2]
    assert stored(app, theirs) == []


def test_a_failed_shared_commit_retries_each_event_in_its_own(app, client, sdk, alice, monkeypatch):
    platform = sdk(alice)
    model_id = start(platform, name="retry", epochs=1000)["modelId"]
    principal = principal_of(app, alice.key)
    finish: Callable[..., Any] = BatchState.finish
    failures: list[int] = []

    def fail_once_for_a_batch(self: BatchState, session: Any) -> None:
        if len(self.writes.epochs) > 1 and not failures:
            failures.append(len(self.writes.epochs))
            raise RuntimeError("the shared commit failed")
        finish(self, session)

    monkeypatch.setattr(BatchState, "finish", fail_once_for_a_batch)
    outcomes, _ = submit_all(app, monkeypatch, [(principal, epoch_event(model_id, e)) for e in range(10)])

    assert failures, "no batch of several events was written"
    assert all(isinstance(o, dict) and o["received"] for o in outcomes), outcomes
    assert stored(app, model_id) == list(range(10))


def test_every_answer_reaches_its_own_caller_when_callers_use_different_loops(app, client, sdk, alice):
    """The writer answers on the loop each event came from: two event loops (two threads) submitting at once."""
    platform = sdk(alice)
    runs = [start(platform, name=f"loop-{i}", epochs=1000)["modelId"] for i in range(2)]
    principal = principal_of(app, alice.key)
    writer = app.state.training.writer
    results: dict[str, list[Any]] = {}

    def caller(model_id: str) -> None:
        async def main() -> list[Any]:
            return await asyncio.gather(*(writer.submit(principal, epoch_event(model_id, e)) for e in range(20)))
        results[model_id] = asyncio.run(main())

    threads = [threading.Thread(target=caller, args=(m,)) for m in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for model_id in runs:
        assert [r["modelId"] for r in results[model_id]] == [model_id] * 20
        assert stored(app, model_id) == list(range(20))



def test_runs_without_validation_losses_keep_every_epoch_and_an_early_stop_final_evaluation_is_not_one(
        app, client, sdk, alice, monkeypatch):
    """The final evaluation (``epoch_end`` once more after training, without ``val/`` losses) is told from an
    epoch by the epoch before it: the batch fetches those together (prefetch) or finds them pending in the batch."""
    platform = sdk(alice)
    no_val = start(platform, name="no-val", epochs=100)["modelId"]
    early = start(platform, name="early-stop", epochs=100)["modelId"]
    principal = principal_of(app, alice.key)
    plain = {"train/box_loss": 1.0, "metrics/mAP50(B)": 0.5}

    def event(model_id: str, epoch: int, metrics: dict[str, float]) -> tuple[Principal, MetricsEvent]:
        return principal, MetricsEvent(event="epoch_end", modelId=model_id,
                                       data={"epoch": epoch, "metrics": metrics, "fitness": 0.1})

    # Batch one: two epochs of each run (the second sees the first pending in the batch).
    submit_all(app, monkeypatch, [event(no_val, 0, plain), event(no_val, 1, plain),
                                  event(early, 0, METRICS), event(early, 1, METRICS)])
    # Later batches: the epoch before is stored, read by the batch's prefetch (and alone, by the fallback).
    outcomes = [asyncio.run(app.state.training.writer.submit(p, b)) for p, b in (
        event(no_val, 2, plain), event(early, 2, {"metrics/mAP50(B)": 0.9}))]
    assert all(o["received"] for o in outcomes)

    assert stored(app, no_val) == [0, 1, 2]  # val=False: every epoch is an epoch
    assert stored(app, early) == [0, 1]  # the early stop's final evaluation is the model's result, not an epoch
    assert platform.models.retrieve("alice", "shapes", "early-stop")["model"]["metrics"]["metrics/mAP50(B)"] == 0.9


def test_a_run_heard_from_has_its_last_event_time_written_once_per_resolution(app, client, sdk, alice, monkeypatch):
    """``last_event_at`` tells a silent run from a live one: every event keeps it within ``HEARD_RESOLUTION`` of
    the event's time, but a run reporting faster does not have its row rewritten in every batch."""
    model_id = start(sdk(alice), epochs=100)["modelId"]
    monkeypatch.setattr(writes, "HEARD_RESOLUTION", timedelta(hours=1))

    def last_event_at() -> datetime:
        with app.state.lanner.db.session() as session:
            return session.scalar(select(Run.last_event_at).where(Run.model_id == model_id))

    long_ago = utcnow() - timedelta(hours=2)
    with app.state.lanner.db.session() as session:
        session.execute(update(Run).where(Run.model_id == model_id).values(last_event_at=long_ago))
    principal = principal_of(app, alice.key)
    submit_all(app, monkeypatch, [(principal, epoch_event(model_id, 0))])
    heard = last_event_at()
    assert heard - long_ago > timedelta(hours=1)  # older than the resolution: written
    outcomes, _ = submit_all(app, monkeypatch, [(principal, epoch_event(model_id, epoch)) for epoch in (1, 2)])
    assert all(not isinstance(o, Exception) for o in outcomes)
    assert last_event_at() == heard  # within it: left as it was
    assert stored(app, model_id) == [0, 1, 2]


def test_on_sqlite_the_writer_commits_without_checkpointing_and_has_its_log_checkpointed(app, client, sdk, alice,
                                                                                         monkeypatch):
    """Its commits never stop for a checkpoint (``lanner.db.wal``): its own connections turn SQLite's automatic one
    off, and each batch nudges the checkpointer thread instead."""
    writer = app.state.training.writer
    if app.state.lanner.db.sqlite_path() is None:
        assert writer.checkpointer is None  # PostgreSQL: nothing to checkpoint
        return
    with writer._db.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
    with app.state.lanner.db.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 1000  # every other writer's
    model_id = start(sdk(alice), epochs=100)["modelId"]
    before = writer.checkpointer.checkpoints
    submit_all(app, monkeypatch, [(principal_of(app, alice.key), epoch_event(model_id, 0))])
    deadline = time.monotonic() + 30
    while writer.checkpointer.checkpoints == before:
        assert time.monotonic() < deadline, "the batch's commit did not lead to a checkpoint"
        time.sleep(0.01)
    assert stored(app, model_id) == [0]
