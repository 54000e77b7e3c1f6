"""The export queue's decisions, with a fake executor (the real one runs in ``test_e2e_exports.py``): launch
while there is room, running, a failure's printed reason kept, a lost worker run again then failed, a
cancelled job's worker stopped, a timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lanner.exports import jobs
from lanner.exports.models import ModelExport
from lanner.exports.queue import ExportQueue
from lanner.exports.worker import ERROR_MARK
from lanner.training.executors.base import Capacity, Executor, JobState, JobStatus, LaunchSpec
from tests.exports.conftest import fake_weights
from tests.trained import attach_weights


class FakeExecutor(Executor):
    name = "fake"

    def __init__(self, slots: int = 1) -> None:
        self.slots = slots
        self.launched: list[LaunchSpec] = []
        self.states: dict[str, JobStatus] = {}
        self.logs: dict[str, str] = {}
        self.stopped: list[str] = []

    def offers(self, gpu_type: str) -> bool:
        return gpu_type == "cpu"

    def capacity(self) -> dict[str, Capacity]:
        return {"cpu": Capacity(total=self.slots, free=self.slots)}

    def launch(self, spec: LaunchSpec) -> str:
        self.launched.append(spec)
        external = f"fake-{len(self.launched)}"
        self.states[external] = JobStatus(JobState.RUNNING)
        return external

    def status(self, external_id: str) -> JobStatus:
        return self.states[external_id]

    def stop(self, external_id: str) -> None:
        self.stopped.append(external_id)
        self.states[external_id] = JobStatus(JobState.STOPPED)

    def log_tail(self, external_id: str, lines: int = 20) -> str:
        return self.logs.get(external_id, "")


@pytest.fixture
def setup(app: Any, alice: Any, sdk: Any, tmp_path: Path) -> tuple[ExportQueue, FakeExecutor, Any]:
    attach_weights(app, alice, fake_weights(tmp_path))
    fake = FakeExecutor()
    return ExportQueue(app.state.lanner, fake), fake, sdk(alice)


def _job(app: Any, export_id: str) -> ModelExport:
    with app.state.lanner.db.session() as session:
        job = session.get(ModelExport, export_id)
        session.expunge(job)
        return job


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_launch_one_at_a_time_and_keep_the_printed_reason(app, setup) -> None:
    queue, fake, platform = setup
    first = platform.exports.create("alice", "shapes", "tiny", format="onnx")["id"]
    second = platform.exports.create("alice", "shapes", "tiny", format="torchscript")["id"]
    queue.run_once()
    assert len(fake.launched) == 1 and _job(app, first).status == jobs.RUNNING  # one CPU slot
    spec = fake.launched[0]
    assert spec.env["YOLO_OFFLINE"] == "1" and spec.env["PIP_NO_INDEX"] == "1"
    assert spec.command[-2:] == ["-m", "lanner.exports.worker"] and spec.run_id == first
    fake.states["fake-1"] = JobStatus(JobState.FAILED, 3)
    fake.logs["fake-1"] = 'noise\n' + ERROR_MARK + '{"message": "onnx export failed: it broke"}'
    queue.run_once()
    failed = _job(app, first)
    assert failed.status == jobs.FAILED and failed.error == "onnx export failed: it broke"
    assert failed.external_id is None and failed.source_sha256 is None
    assert len(fake.launched) == 2 and _job(app, second).status == jobs.RUNNING  # the slot went to the next


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_lost_worker_is_run_again_then_failed_and_cancel_stops_it(app, setup) -> None:
    queue, fake, platform = setup
    export_id = platform.exports.create("alice", "shapes", "tiny", format="onnx")["id"]
    for attempt in range(1, jobs.MAX_ATTEMPTS + 1):
        queue.run_once()
        assert _job(app, export_id).attempt == attempt and _job(app, export_id).status == jobs.RUNNING
        fake.states[f"fake-{attempt}"] = JobStatus(JobState.LOST, None, "worker process is gone")
    queue.run_once()
    lost = _job(app, export_id)
    assert lost.status == jobs.FAILED and "lost 3 times" in (lost.error or "")

    other = platform.exports.create("alice", "shapes", "tiny", format="torchscript")["id"]
    queue.run_once()
    platform.exports.delete("alice", "shapes", "tiny", other)
    queue.run_once()  # stops the worker
    queue.run_once()  # sees it gone
    assert fake.stopped == [_external(fake, other)] and _job(app, other).external_id is None


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_export_past_its_timeout_is_killed(app, setup) -> None:
    queue, fake, platform = setup
    app.state.lanner.settings.export_timeout_seconds = 0.001
    export_id = platform.exports.create("alice", "shapes", "tiny", format="onnx")["id"]
    queue.run_once()
    queue.run_once()
    job = _job(app, export_id)
    assert job.status == jobs.FAILED and "LANNER_EXPORT_TIMEOUT_SECONDS" in (job.error or "")
    assert fake.stopped


def _external(fake: FakeExecutor, export_id: str) -> str:
    return next(f"fake-{i + 1}" for i, spec in enumerate(fake.launched) if spec.run_id == export_id)


def test_the_gpu_is_used_only_where_the_artefact_depends_on_it():
    from lanner.exports.models import ModelExport
    from lanner.exports.queue import export_device

    def device(fmt: str, gpu: str, **args: object) -> str:
        return export_device(ModelExport(format=fmt, gpu_type=gpu, args=args))

    assert device("torchscript", "h100-sxm") == "cpu"  # a Ray node's GPU may not be visible: never needed here
    assert device("onnx", "h100-sxm", quantize=16) == "0"
    assert device("engine", "h100-sxm") == "0"
    assert device("onnx", "cpu", quantize=16) == "cpu"


class UnreadableExecutor(FakeExecutor):
    """Statuses that cannot be read, as for a local worker on another host after the lease moved."""

    def status(self, external_id: str) -> JobStatus:
        raise RuntimeError(f"worker {external_id} was launched on another machine")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_export_whose_worker_cannot_be_read_lets_go_once_it_ended_or_timed_out(app, alice, sdk, tmp_path,
                                                                                    monkeypatch) -> None:
    """Without a status the queue still judges by the export: one its upload completed (or cancelled) frees its
    slot after the stop grace; one running past its timeout fails. Before, its ``external_id`` stayed for ever,
    holding a slot."""
    from datetime import timedelta

    from lanner.exports import queue as queue_module

    attach_weights(app, alice, fake_weights(tmp_path))
    fake = UnreadableExecutor()
    queue, platform = ExportQueue(app.state.lanner, fake), sdk(alice)
    done = platform.exports.create("alice", "shapes", "tiny", format="onnx")["id"]
    queue.run_once()
    assert _job(app, done).status == jobs.RUNNING
    with app.state.lanner.db.session() as session:  # its upload arrived meanwhile (any server takes it)
        session.get(ModelExport, done).status = jobs.COMPLETED
    queue.run_once()
    assert _job(app, done).external_id is not None  # within the grace: maybe still wrapping up
    later = queue_module.utcnow() + timedelta(seconds=queue_module.STOP_GRACE_SECONDS + 1)  # the grace passed
    monkeypatch.setattr(queue_module, "utcnow", lambda: later)
    queue.run_once()
    assert _job(app, done).external_id is None and _job(app, done).status == jobs.COMPLETED
    assert fake.stopped

    app.state.lanner.settings.export_timeout_seconds = 30
    stuck = platform.exports.create("alice", "shapes", "tiny", format="torchscript")["id"]
    monkeypatch.undo()
    queue.run_once()
    assert _job(app, stuck).status == jobs.RUNNING
    now = queue_module.utcnow
    monkeypatch.setattr(queue_module, "utcnow", lambda: now() + timedelta(seconds=31))
    queue.run_once()
    failed = _job(app, stuck)
    assert failed.status == jobs.FAILED and "could not be read" in (failed.error or "") and failed.external_id is None
