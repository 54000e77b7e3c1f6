"""More of the supervisor against fake executors: a cancelled run's worker keeps its key until it is gone (also
across a restart, a stop it ignores, or a status nobody can read), local slots counted from the database so a
restart cannot double-book, local queueing, and the availability levels the executor's capacity maps to."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from lanner.training.capacity import availability_level
from lanner.training.executors import Capability, JobState, JobStatus
from lanner.training.models import Run
from lanner.training.supervisor import KILL_AFTER_GRACE_SECONDS, Supervisor
from tests.training.conftest import ARGS, new_model
from tests.training.fakes import FakeExecutor
from tests.training.test_start_api import backdate, credit
from tests.training.test_supervisor import run_row, started_run


def worker_key(executor: FakeExecutor, index: int = 0) -> dict[str, str]:
    return {"Authorization": f"Bearer {executor.launched[index].env['ULTRALYTICS_API_KEY']}"}


def report(client: Any, key: dict[str, str], model_id: str) -> Any:
    """The trainer's next event, as the ultralytics callback sends it."""
    return client.post("/api/webhooks/training/metrics", headers=key,
                       json={"event": "training_progress", "modelId": model_id, "data": {}})


def ended_ago(app: Any, run_id: int, seconds: float) -> None:
    with app.state.lanner.db.session() as session:
        run = session.get(Run, run_id)
        session.execute(update(Run).where(Run.id == run_id)
                        .values(completed_at=run.completed_at - timedelta(seconds=seconds)))


def restart(app: Any, executor: FakeExecutor) -> Supervisor:
    """A new server process: the supervisor's and the executor's memory are gone, the database is not."""
    return app.state.training.use_executor(executor)


class Forgetful(FakeExecutor):
    """An executor after a server restart: it counts only the workers it has been asked about since (as the
    local executor adopts a worker when it is first polled), and ``unreadable`` ones it cannot poll at all."""

    def __init__(self, slots: int, states: dict[str, JobStatus], unreadable: frozenset[str] = frozenset()) -> None:
        super().__init__(slots)
        self.states = dict(states)
        self.adopted: set[str] = set()
        self.unreadable = unreadable

    def status(self, external_id: str) -> JobStatus:
        if external_id in self.unreadable:
            raise RuntimeError(f"Job {external_id} does not exist")
        self.adopted.add(external_id)
        return self.states[external_id]

    def _busy(self, gpu_type: str) -> int:
        known = {self._id(spec) for spec in self.launched} | self.adopted
        return sum(1 for job in known if self.states[job].state in (JobState.RUNNING, JobState.QUEUED))


# --- cancel through the protocol -------------------------------------------------------------------------


def test_a_capped_run_tells_its_worker_through_its_own_key_even_after_a_restart(shapes, app, alice, client,
                                                                               supervisor, fake_executor):
    credit(app, alice, 10_000_000)
    model_id = new_model(shapes, "capped")
    run_id = client.post("/api/training/start", headers=alice.headers, json={
        "modelId": model_id, "gpuType": "cpu", "trainArgs": ARGS, "maxCostCents": 2}).json()["runId"]
    supervisor.run_once()
    backdate(app, seconds=3600, alive=True)
    supervisor.run_once()  # meter reaches the cap and settle runs in the same pass
    run = run_row(app, run_id)
    assert run.status == "cancelled" and run.settled_at is not None
    key = worker_key(fake_executor)
    assert report(client, key, model_id).json()["cancelled"] is True  # not a 401: the trainer stops itself
    states = dict(fake_executor.states)
    states[f"fake-{run_id}-1"] = JobStatus(JobState.RUNNING)  # the stop did not land before the restart
    later = restart(app, Forgetful(5, states))
    assert report(client, key, model_id).json()["cancelled"] is True
    later.executor.set(run_id, 1, JobState.SUCCEEDED, 0)  # the trainer read it and exited
    later.run_once()
    assert report(client, key, model_id).status_code == 401  # gone: its key with it
    assert run_row(app, run_id).worker_exited_at is not None


def test_a_worker_that_ignores_its_stop_is_killed_and_loses_its_key(shapes, app, alice, client, supervisor,
                                                                    fake_executor, monkeypatch):
    monkeypatch.setattr(fake_executor, "stop", lambda external_id: fake_executor.stopped.append(external_id))
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    model_id = run_row(app, run_id).model_id
    client.delete("/api/models/alice/p/m/training", headers=alice.headers)
    supervisor.run_once()
    key = worker_key(fake_executor)
    assert fake_executor.stopped and not fake_executor.killed
    assert report(client, key, model_id).json()["cancelled"] is True  # within the stop's reach: still told
    ended_ago(app, run_id, KILL_AFTER_GRACE_SECONDS + 1)
    supervisor.run_once()
    assert fake_executor.killed == [f"fake-{run_id}-1"]
    assert report(client, key, model_id).status_code == 401


def test_a_cancelled_run_whose_status_cannot_be_read_still_loses_its_key(shapes, app, alice, client, supervisor,
                                                                         fake_executor):
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    model_id = run_row(app, run_id).model_id

    def unknown(external_id: str) -> JobStatus:
        raise RuntimeError(f"Job {external_id} does not exist")  # as Ray answers after a head restart

    fake_executor.status = unknown
    client.delete("/api/models/alice/p/m/training", headers=alice.headers)
    supervisor.run_once()
    key = worker_key(fake_executor)
    assert report(client, key, model_id).json()["cancelled"] is True  # it may still be out there: tell it
    ended_ago(app, run_id, 3600)
    supervisor.jobs.unreadable_since[run_id] -= timedelta(seconds=3600)
    supervisor.run_once()
    assert report(client, key, model_id).status_code == 401
    assert run_row(app, run_id).worker_exited_at is not None and f"fake-{run_id}-1" in fake_executor.killed


def test_a_queued_job_whose_status_cannot_be_read_is_submitted_again(shapes, app, alice, supervisor,
                                                                    fake_executor):
    run_id = started_run(shapes, app, alice)
    fake_executor.capabilities = Capability.QUEUES_JOBS  # like Ray: it queues the job itself

    def queue(spec: Any) -> str:
        fake_executor.launched.append(spec)
        return f"fake-{spec.run_id}-{spec.attempt}"

    def unknown(external_id: str) -> JobStatus:
        raise RuntimeError(f"Job {external_id} does not exist")

    fake_executor.launch = queue
    fake_executor.status = unknown
    supervisor.run_once()
    supervisor.run_once()
    assert run_row(app, run_id).status == "pending" and len(fake_executor.launched) == 1  # not for long enough
    supervisor.jobs.unreadable_since[run_id] -= timedelta(seconds=601)
    supervisor.run_once()
    supervisor.run_once()
    run = run_row(app, run_id)
    assert run.status == "pending" and len(fake_executor.launched) == 2 and run.attempt == 2


# --- capacity ------------------------------------------------------------------------------------------


def test_a_restart_does_not_double_book_a_slot(shapes, app, alice, client, supervisor, fake_executor):
    fake_executor.slots = 1
    first = started_run(shapes, app, alice, "first")
    supervisor.run_once()
    assert run_row(app, first).status == "starting"
    later = restart(app, Forgetful(1, fake_executor.states))
    second = started_run(shapes, app, alice, "second")
    later.run_once()
    assert run_row(app, second).status == "pending" and later.executor.launched == []
    client.delete("/api/models/alice/p/first/training", headers=alice.headers)
    later.run_once()  # stopped
    later.run_once()  # seen gone: its slot is free
    assert [s.run_id for s in later.executor.launched] == [second]


def test_a_worker_whose_status_cannot_be_read_still_holds_its_slot(shapes, app, alice, supervisor, fake_executor):
    fake_executor.slots = 1
    first = started_run(shapes, app, alice, "first")
    supervisor.run_once()
    later = restart(app, Forgetful(1, fake_executor.states, unreadable=frozenset({f"fake-{first}-1"})))
    second = started_run(shapes, app, alice, "second")
    later.run_once()
    later.run_once()
    assert run_row(app, second).status == "pending" and later.executor.launched == []  # the database knows


def test_local_runs_beyond_capacity_queue_until_a_slot_frees(shapes, app, alice, client, supervisor,
                                                             fake_executor):
    fake_executor.slots = 2
    runs = [started_run(shapes, app, alice, name) for name in ("a", "b", "c")]
    supervisor.run_once()
    supervisor.run_once()
    assert [run_row(app, r).status for r in runs] == ["starting", "starting", "pending"]
    assert run_row(app, runs[2]).external_id is None and len(fake_executor.launched) == 2
    client.delete("/api/models/alice/p/a/training", headers=alice.headers)
    supervisor.run_once()  # its worker is told to stop; the slot is free once it is seen gone
    assert run_row(app, runs[2]).status == "pending"
    supervisor.run_once()
    assert run_row(app, runs[2]).status == "starting"
    assert [s.run_id for s in fake_executor.launched] == runs


# --- availability ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("free", "total", "level"), [
    (0, 4, "Low"), (-1, 4, "Low"), (1, 4, "Medium"), (2, 4, "High"), (4, 4, "High"),
    (1, 3, "Medium"), (2, 3, "High"), (1, 1, "High"), (0, 1, "Low"),
])
def test_availability_level_thresholds(free: int, total: int, level: str) -> None:
    assert availability_level(free, total) == level  # High: at least half free; Medium: some; Low: none


def test_gpu_availability_follows_the_executors_free_slots(shapes, app, alice, client, supervisor,
                                                           fake_executor):
    fake_executor.slots = 3

    def levels() -> dict[str, Any]:
        response = client.get("/api/training/gpu-availability")  # public: no key
        assert response.status_code == 200
        return response.json()

    first = levels()
    assert first["cpu"] == "High" and first["h100-sxm"] == "High"
    assert all(level is None for gpu, level in first.items() if gpu not in ("cpu", "h100-sxm"))  # none here
    for name, level in (("a", "High"), ("b", "Medium"), ("c", "Low")):  # 2 of 3 free, 1 of 3, none
        run_id = started_run(shapes, app, alice, name)
        supervisor.run_once()
        assert run_row(app, run_id).status == "starting"
        assert levels()["cpu"] == level
    assert levels()["h100-sxm"] == "High"
    fake_executor.slots = 0  # an executor with no such slot at all: no level, not "Low"
    assert levels()["cpu"] is None
