"""The endpoint supervisor's decisions, pass by pass, with a scripted backend (no process runs; the real local
and Ray backends have their own end-to-end tests): launch, ready, a crash restarted after a backoff with its
reason shown, too many crashes in a row -> failed, a model that cannot be served -> failed at once, a start
that never gets ready, stop, delete, a resize rolled out, and metering into the ledger (stopped: free; credit
gone: stopped)."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from ultralytics_platform import Platform

from lanner.app import create_app
from lanner.config import Settings
from lanner.db import utcnow
from lanner.deployments.backends import Launched, Observation, Seen, reason_from
from lanner.deployments.models import Deployment
from tests.conftest import TEST_URL, Account
from tests.deployments.conftest import attach


class ScriptedBackend:
    """Launches nothing; each launched id reports what the test says (``starting`` until told otherwise)."""

    name = "local"

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.seen: dict[str, Observation] = {}
        self.launches: list[Any] = []
        self.stopped: list[str] = []

    def launch(self, spec: Any, *, used_ports: set[int]) -> Launched:
        external = f"{next(self.ids)}:fake"
        self.launches.append(spec)
        self.seen[external] = Observation(Seen.STARTING)
        return Launched(external, f"http://127.0.0.1:1{len(self.launches):04d}")

    def observe(self, external_id: str, url: str | None, *, cpu: int, deployment: str | None = None) -> Observation:
        return self.seen[external_id]

    def stop(self, external_id: str) -> None:
        self.stopped.append(external_id)

    def gone(self, external_id: str) -> bool:
        return external_id in self.stopped

    def forget(self, deployment_id: str) -> None:
        self.forgotten = deployment_id

    def latest(self) -> str:
        return list(self.seen)[-1]


@pytest.fixture
def world(settings: Settings, shapes_detector: Any) -> Any:
    app = create_app(settings.model_copy(update={
        "endpoint_poll_seconds": 0, "supervisor_interval_seconds": 0, "maintenance_interval_seconds": 0,
        "export_poll_seconds": 0, "endpoint_max_restarts": 2, "meter_interval_seconds": 0,
        "endpoint_price_per_vcpu_hour": 3.6, "endpoint_price_per_gib_hour": 0.0}))
    backend = ScriptedBackend()
    app.state.deployments.supervisor.use_backend("local", backend)
    with TestClient(app) as client:
        from lanner.accounts import service as accounts_service
        from lanner.billing import service as billing_service

        with app.state.lanner.db.session() as session:
            user = accounts_service.create_user(session, username="alice")
            billing_service.top_up(session, user_id=user.id, micros=1_000_000)  # $1
            key = accounts_service.create_api_key(session, user=user)[1]
        attach(app, Account("alice", user.id, key, {}), shapes_detector)
        platform = Platform(api_key=key, base_url=TEST_URL, http_client=client, max_retries=0)
        yield app, backend, platform
    app.state.lanner.db.dispose()


def passes(app: Any, count: int = 1) -> None:
    for _ in range(count):
        app.state.deployments.supervisor.run_once()


def row(app: Any, name: str = "tiny") -> Deployment:
    from sqlalchemy import select

    with app.state.lanner.db.session() as session:
        return session.scalar(select(Deployment).where(Deployment.name == name))


def edit(app: Any, deployment_id: str, **values: Any) -> None:
    with app.state.lanner.db.session() as session:
        found = session.get(Deployment, deployment_id)
        for key, value in values.items():
            setattr(found, key, value)


def test_launch_ready_crash_backoff_and_failure(world: Any) -> None:
    app, backend, platform = world
    platform.deployments.create("alice", project="shapes", model="tiny", deployment="tiny", name="tiny",
                                region="us-central1", cpu=2)
    passes(app)
    first = row(app)
    assert first.status == "deploying" and first.external_id == backend.latest() and len(backend.launches) == 1
    assert backend.launches[0].cpu == 2 and backend.launches[0].model_uri == "ul://alice/shapes/tiny"
    passes(app, 2)
    assert row(app).status == "deploying"  # starting: not ready yet
    backend.seen[backend.latest()] = Observation(Seen.UP, instances=1)
    passes(app)
    ready = platform.deployments.retrieve("alice", "tiny")["deployment"]
    assert ready["status"] == "ready" and ready["statusMessage"] == "serving with PyTorch" and ready["deployedAt"]

    # Killed: restarted after 1 s, the reason shown; not before the backoff is over.
    backend.seen[backend.latest()] = Observation(Seen.DOWN, "the serving process killed by signal 9")
    passes(app)
    crashed = platform.deployments.retrieve("alice", "tiny")["deployment"]
    assert crashed["status"] == "deploying"
    assert crashed["statusMessage"] == "the serving process killed by signal 9; restarting in 1 s (restart 1)"
    passes(app)
    assert len(backend.launches) == 1
    edit(app, first.id, retry_at=utcnow() - timedelta(seconds=1))
    passes(app)
    assert len(backend.launches) == 2 and row(app).status == "deploying"
    backend.seen[backend.latest()] = Observation(Seen.UP, instances=1)
    passes(app)
    assert row(app).status == "ready" and row(app).restarts == 1

    # Crashing again and again: 1 s, 2 s, then failed (LANNER_ENDPOINT_MAX_RESTARTS=2 here).
    for expected_delay in ("2 s", None):
        backend.seen[backend.latest()] = Observation(Seen.DOWN, "exited with code 1: MemoryError")
        passes(app)
        message = row(app).status_message or ""
        if expected_delay:
            assert f"restarting in {expected_delay}" in message
            edit(app, first.id, retry_at=utcnow())
            passes(app)
    failed = platform.deployments.retrieve("alice", "tiny")["deployment"]
    assert failed["status"] == "failed" and "crashed 3 times in a row" in failed["statusMessage"]
    logs = [e["message"] for e in platform.deployments.logs("alice", "tiny")["entries"]]
    assert logs[0].startswith("failed: exited with code 1: MemoryError")
    assert any("killed by signal 9; restarting in 1 s" in line for line in logs)

    # Started again by its owner: a fresh count. A model that cannot be served fails at once.
    assert platform.deployments.update("alice", "tiny", body={"action": "start"})["status"] == "deploying"
    passes(app)
    backend.seen[backend.latest()] = Observation(Seen.FAILED, "the weights are not a loadable checkpoint")
    passes(app)
    unservable = row(app)
    assert unservable.status == "failed" and unservable.external_id is None
    assert unservable.status_message == "cannot be served: the weights are not a loadable checkpoint"


def test_start_timeout_stop_resize_delete_and_metering(world: Any) -> None:
    app, backend, platform = world
    platform.deployments.create("alice", project="shapes", model="tiny", deployment="tiny", name="tiny",
                                region="us-central1")
    passes(app)
    deployment_id = row(app).id
    edit(app, deployment_id, launched_at=utcnow() - timedelta(seconds=400))
    stuck = backend.latest()
    passes(app)
    timed_out = row(app)
    assert "not ready 300 s after its launch; restarting in 1 s" in timed_out.status_message
    assert stuck in backend.stopped and timed_out.external_id == f"retiring:{stuck}"
    passes(app)  # the stuck process is gone: the next launch waits for its backoff
    edit(app, deployment_id, retry_at=utcnow())
    passes(app)
    backend.seen[backend.latest()] = Observation(Seen.UP, instances=1)
    passes(app)
    assert row(app).status == "ready"

    # Metering: 1 vCPU at $3.60/h is 1,000 micro-dollars a second, from the launch on.
    edit(app, deployment_id, billing_since=utcnow() - timedelta(seconds=10))
    passes(app)
    metered = row(app)
    assert 10_000 <= metered.charged_micros <= 12_000 and metered.billing_since is not None
    charges = [t for t in platform.billing.transactions()["transactions"] if t["type"] == "deployment"]
    assert charges and charges[0]["kind"] == "endpoint" and charges[0]["description"].startswith("Endpoint tiny")

    # A resize rolls a new process out: the old one is stopped first.
    running = backend.latest()
    assert platform.deployments.update("alice", "tiny", body={"action": "resize", "cpu": 4})["status"] == \
        "deploying"
    passes(app, 2)
    assert running in backend.stopped and backend.launches[-1].cpu == 4
    backend.seen[backend.latest()] = Observation(Seen.UP, instances=1)
    passes(app)
    assert row(app).status == "ready" and row(app).cpu == 4

    # Stopped: the clock stops with the process; a stopped endpoint costs nothing.
    platform.deployments.update("alice", "tiny", body={"action": "stop"})
    passes(app)
    stopped = row(app)
    assert stopped.status == "stopped" and stopped.billing_since is None and stopped.external_id is None
    charged = stopped.charged_micros
    passes(app, 2)
    assert row(app).charged_micros == charged

    # The credit runs out: stopped with that reason.
    platform.deployments.update("alice", "tiny", body={"action": "start"})
    passes(app)
    backend.seen[backend.latest()] = Observation(Seen.UP, instances=1)
    passes(app)
    edit(app, deployment_id, billing_since=utcnow() - timedelta(hours=2))  # $28.80 of a $1 credit
    passes(app, 3)
    broke = row(app)
    assert broke.status == "stopped"
    assert "credit ran out" in " ".join(e["message"] for e in platform.deployments.logs("alice", "tiny")["entries"])
    assert platform.billing.usage_summary()["creditsCents"] == 0

    # Deleted: gone for the owner at once, its row once the process is.
    platform.deployments.update("alice", "tiny", body={"action": "start"})
    passes(app)
    platform.deployments.delete("alice", "tiny")
    last = backend.latest()
    passes(app)
    assert last in backend.stopped and row(app) is None and backend.forgotten == deployment_id


def test_a_killed_process_is_not_blamed_on_an_error_it_logged_earlier() -> None:
    """A signal ended the process: an earlier traceback line in its log (a client hanging up) is not the reason;
    the line a serving process prints on purpose before it exits still is."""
    tail = ("lanner endpoint d1: pytorch model loaded in 2.8 s, listening on 127.0.0.1:18000\n"
            "ConnectionResetError: [Errno 104] Connection reset by peer\n")
    assert reason_from(tail) == "ConnectionResetError: [Errno 104] Connection reset by peer"
    assert reason_from(tail, killed=True) is None
    assert reason_from(tail + "lanner-endpoint: out of memory loading the model\n", killed=True) == \
        "out of memory loading the model"


def test_a_ready_endpoint_is_restarted_only_after_missing_checks_for_a_while(world: Any, monkeypatch: Any) -> None:
    """Three missed health checks in quick succession (a busy process on a loaded machine) restart nothing;
    still unanswered ``UNHEALTHY_SECONDS`` after the first miss, the process is stopped and launched again."""
    from lanner.deployments import supervisor as module

    app, backend, platform = world
    platform.deployments.create("alice", project="shapes", model="tiny", deployment="tiny", name="tiny",
                                region="us-central1")
    passes(app)
    backend.seen[backend.latest()] = Observation(Seen.UP, instances=1)
    passes(app)
    assert row(app).status == "ready"
    clock = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    backend.seen[backend.latest()] = Observation(Seen.STARTING)  # alive, not answering /health
    passes(app, module.UNHEALTHY_CHECKS + 2)
    assert row(app).status == "ready" and backend.stopped == []
    clock[0] += module.UNHEALTHY_SECONDS
    passes(app)
    restarted = row(app)
    assert restarted.status == "deploying" and backend.stopped == ["1:fake"]
    assert restarted.status_message == "its process stopped answering health checks; restarting in 1 s (restart 1)"


def test_a_port_another_servers_endpoint_answers_on_is_not_this_endpoint_up(settings: Settings) -> None:
    """Two Lanner servers on one machine may pick the same free port at once; the one whose process could not
    bind it must not take the other's answers to ``/health`` for its own."""
    import json
    import os
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from lanner.deployments.backends import LocalBackend
    from lanner.training.executors import JobState, JobStatus
    from tests.training.fakes import FakeExecutor

    class Other(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            body = json.dumps({"ok": True, "deployment": "someone-elses"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        executor = FakeExecutor()
        ours = f"{os.getpid()}:1"  # the local executor's id: the process's pid first
        executor.states[ours] = JobStatus(JobState.RUNNING)
        backend = LocalBackend(settings, executor=executor)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert backend.observe(ours, url, cpu=1, deployment="ours-deployment").seen is Seen.STARTING
        assert backend.observe(ours, url, cpu=1, deployment="someone-elses").seen is Seen.UP
    finally:
        server.shutdown()
