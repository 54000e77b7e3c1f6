"""End to end on PostgreSQL, three real ``lanner serve`` processes on one database (and one home: blobs on the
local disk): each background loop runs in the one process holding its lease, so ``LANNER_LOCAL_MAX_RUNS=2``
holds with 8 runs started at once through all three (trainer processes sampled), each run has one charge
writer and an exact ledger, an SSE client on one process follows a run another process dispatches and ends,
and the import of a leader killed with -9 is taken over by another process and done once (attempt 2); an export
worker and a real CPU trainer whose leader is killed with -9 live on, are adopted by pid by the next leader and
finish once (attempt 1, never relaunched). The servers sit behind one balancer, their shared LANNER_PUBLIC_URL
(as a deployment's load balancer): the URLs workers call back on must outlive any one process.

The local executor is the real one; its worker program is a stand-in that lives a few seconds (the real
trainer's minutes of CPU, eight times over, would only make the bound slower to test on this machine: the bound
is on processes alive, whatever they run). A stand-in that exits without a result fails its run, as a real
crashed trainer would, and the run is settled to its billed seconds."""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import onnx
import psutil
import pytest
from sqlalchemy import select
from ultralytics_platform import Platform

from lanner.billing.metering import charge_for
from lanner.datasets.models import ImportJob
from lanner.db import Database
from lanner.db.leases import LeaseRow
from lanner.exports.models import ModelExport
from lanner.synthetic import make_detection_dataset
from lanner.training.models import Run
from tests.datasets.helpers import package, wait_for_import
from tests.pg import PostgresCluster
from tests.servers import Balancer, Server, free_port, lanner_cli, start_server, wait_for
from tests.training.orchestration import add_dataset, assert_metered_once, eight_runs_at_once, new_model, run_ledger
from tests.web.pages import PASSWORD, token_of

pytestmark = pytest.mark.e2e
_databases = itertools.count()
LEASE_SECONDS = 10.0  # renewed every 3.3 s: a renewal late under load must not move a lease mid-test


@dataclass
class Cluster:
    servers: list[Server]
    db: Database
    key: str
    home: Path
    stand_in: Path

    def platform(self, server: Server) -> Platform:
        return Platform(base_url=server.url, api_key=self.key, timeout=60)

    def leader(self, loop: str) -> Server | None:
        """The server whose process holds ``loop``'s unexpired lease."""
        with self.db.session() as session:
            row = session.get(LeaseRow, loop)
            if row is None or row.expires_at < time.time():
                return None
        pid = int(row.holder.split(":")[1])
        return next((s for s in self.servers if s.process.pid == pid), None)


@pytest.fixture
def cluster(postgres: PostgresCluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three servers behind one balancer; ``request.param`` (indirect parametrization) overrides settings, a
    ``None`` value removing one."""
    name = f"lanner_leases_{next(_databases)}"
    postgres.execute(f"CREATE DATABASE {name} TEMPLATE lanner_template")
    url = postgres.url(name)
    home = tmp_path / "home"
    home.mkdir()
    stand_in = tmp_path / "worker-stand-in"
    stand_in.write_text("#!/bin/sh\nsleep 3\n")
    stand_in.chmod(0o755)
    lanner_cli(home, "users", "create", "alice", "--tier", "pro", "--password", PASSWORD, LANNER_DATABASE_URL=url)
    key = lanner_cli(home, "keys", "create", "alice", LANNER_DATABASE_URL=url)
    lanner_cli(home, "credits", "add", "alice", "50", LANNER_DATABASE_URL=url)
    settings = {"LANNER_DATABASE_URL": url, "LANNER_LEASE_SECONDS": str(LEASE_SECONDS), "LANNER_LOCAL_MAX_RUNS": "2",
                "LANNER_SUPERVISOR_INTERVAL_SECONDS": "0.5", "LANNER_WORKER_PYTHON": str(stand_in),
                "LANNER_METER_INTERVAL_SECONDS": "600", "LANNER_EXPORT_POLL_SECONDS": "0.3"}
    settings = {k: v for k, v in {**settings, **getattr(request, "param", {})}.items() if v is not None}
    ports = [free_port() for _ in range(3)]
    balancer = Balancer(ports)
    servers: list[Server] = []
    db = Database(url)
    try:
        for n, port in enumerate(ports):
            servers.append(start_server(home, port, log_name=f"server-{n}.log", LANNER_PUBLIC_URL=balancer.url,
                                        **settings))
        yield Cluster(servers, db, key, home, stand_in)
    finally:
        for server in servers:
            server.stop()
        balancer.close()
        db.dispose()


def test_max_runs_hold_across_processes_with_one_charge_writer_per_run_and_sse_anywhere(cluster: Cluster,
                                                                                        tmp_path: Path) -> None:
    first = cluster.platform(cluster.servers[0])
    add_dataset(tmp_path, first, train=4, val=2)
    models = [new_model(first, "leases", f"m{n}") for n in range(8)]
    supervisor = wait_for(lambda: cluster.leader("lanner-supervisor"), timeout=60, what="a supervisor leader")
    # An SSE client on another process than the one that dispatches and meters.
    other = next(s for s in cluster.servers if s is not supervisor)
    seen: list[dict[str, Any]] = []
    follow = threading.Thread(target=_follow_live, args=(other, "leases", "m0", seen), daemon=True)

    # The stream is followed once m0's run is active (the stream of an untrained model ends at once).
    peak, leaders, runs = eight_runs_at_once(cluster.db, [cluster.platform(server) for server in cluster.servers],
                                             models, cluster.stand_in, imgsz=64, on_started=follow.start)
    assert 1 <= peak <= 2, f"{peak} trainer processes alive at once with LANNER_LOCAL_MAX_RUNS=2"
    assert_metered_once(first, runs, leaders)

    follow.join(timeout=60)
    statuses = [event["status"] for event in seen]
    # Followed on a process that neither dispatched, metered nor failed it: every change reached it.
    assert statuses[-1] == "failed" and not seen[-1]["active"], seen
    assert any(event["active"] for event in seen), statuses
    print(f"trainer processes alive at once, sampled every 50 ms: at most {peak}")


def _follow_live(server: Server, project: str, model: str, seen: list[dict[str, Any]]) -> None:
    """Sign in on ``server`` and read the model page's live stream until its ``end`` event."""
    with httpx.Client(base_url=server.url, timeout=120) as client:
        token = token_of(client.get("/login").text)
        response = client.post("/login", data={"username": "alice", "password": PASSWORD, "csrf_token": token},
                               follow_redirects=False)
        assert response.status_code == 303, response.text
        with client.stream("GET", f"/alice/{project}/{model}/live") as stream:
            event = None
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event == "run":
                    seen.append(json.loads(line.split(":", 1)[1]))
                elif line.startswith("data:") and event == "end":
                    return


def test_a_leader_killed_mid_import_is_taken_over_and_the_import_done_once(cluster: Cluster, tmp_path: Path) -> None:
    archive = package(make_detection_dataset(tmp_path / "big", train=600, val=8).parent, tmp_path / "zip")
    platform = cluster.platform(cluster.servers[0])
    created = platform.datasets.create(dataset="big", name="big")
    signed = platform.upload.signed_url(body={"assetType": "datasets", "assetId": created["id"],
                                              "filename": archive.name, "totalBytes": archive.stat().st_size})
    assert httpx.put(signed["uploadUrl"], content=archive.read_bytes(), timeout=60).status_code == 200
    platform.datasets.ingest("alice", "big", body={"sessionId": signed["sessionId"]})

    def running_job() -> ImportJob | None:
        with cluster.db.session() as session:
            return session.scalar(select(ImportJob).where(ImportJob.status == "running"))

    job = wait_for(running_job, timeout=120, what="the import to start")
    pid = int(job.worker.split(":")[1])
    leader = next(s for s in cluster.servers if s.process.pid == pid)
    assert cluster.leader("lanner-imports") is leader  # only the leaseholder dispatches imports
    time.sleep(1.0)  # mid-import: its worker is probing and storing images
    leader.process.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    leader.process.wait()
    survivor = next(s for s in cluster.servers if s is not leader)
    successor = wait_for(lambda: cluster.leader("lanner-imports") not in (None, leader) and
                         cluster.leader("lanner-imports"), timeout=60, what="another process to take the lease")
    took_over = time.monotonic() - killed_at
    assert successor is not leader and took_over < 60
    dataset = wait_for_import(cluster.platform(survivor), "alice", "big", timeout=300)
    assert dataset["status"] == "ready" and dataset["imageCount"] == 608
    with cluster.db.session() as session:
        jobs = list(session.scalars(select(ImportJob)))
    assert [(j.status, j.attempts) for j in jobs] == [("succeeded", 2)]
    assert int(jobs[0].worker.split(":")[1]) == successor.process.pid
    print(f"import lease taken over {took_over:.1f} s after kill -9 (lease {LEASE_SECONDS:g} s)")


@pytest.mark.parametrize("cluster", [{"LANNER_WORKER_PYTHON": None}], indirect=True)  # the real export worker
def test_a_leader_killed_mid_export_leaves_its_worker_to_finish_and_the_export_done_once(
        cluster: Cluster, tmp_path: Path, tiny_weights: Path) -> None:
    platform = cluster.platform(cluster.servers[0])
    platform.projects.create(owner="alice", project="shapes", name="shapes", visibility="private")
    model = platform.models.create(body={"project": "shapes", "model": "tiny", "name": "tiny"})
    slot = platform.upload.signed_url(body={"assetType": "models", "assetId": model["id"], "filename": "best.pt"})
    httpx.put(slot["uploadUrl"], content=tiny_weights.read_bytes(), timeout=60).raise_for_status()
    platform.upload.complete(session_id=slot["sessionId"])
    created = platform.exports.create("alice", "shapes", "tiny", format="onnx", args={"imgsz": 64})

    def running() -> ModelExport | None:
        with cluster.db.session() as session:
            job = session.get(ModelExport, created["id"])
            return job if job.status == "running" and job.external_id else None

    job = wait_for(running, timeout=120, what="the export worker to start")
    worker = psutil.Process(int(job.external_id.split(":")[0]))
    leader = wait_for(lambda: cluster.leader("lanner-exports"), timeout=30, what="the exports leader")
    assert worker.ppid() == leader.process.pid  # the leader launched it
    leader.process.send_signal(signal.SIGKILL)
    leader.process.wait()
    # Its own session: the worker lives on (adopted by init) and is watched by pid by the next leader.
    assert worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE
    successor = wait_for(lambda: cluster.leader("lanner-exports") not in (None, leader) and
                         cluster.leader("lanner-exports"), timeout=60, what="another process to take the lease")
    survivor = cluster.platform(successor)

    def finished() -> dict[str, Any] | None:
        export = survivor.exports.retrieve("alice", "shapes", "tiny", created["id"])["export"]
        return export if export["status"] in ("completed", "failed", "cancelled") else None

    done = wait_for(finished, timeout=300, what="the export to end", every=0.5)
    assert done["status"] == "completed", done.get("error")
    with cluster.db.session() as session:
        rows = list(session.scalars(select(ModelExport)))
    assert [(row.format, row.status, row.attempt) for row in rows] == [("onnx", "completed", 1)]  # never relaunched
    response = httpx.get(done["file"]["downloadUrl"], timeout=60)
    assert response.status_code == 200 and len(response.content) == done["file"]["size"]
    onnx.checker.check_model(onnx.load_from_string(response.content))
    wait_for(lambda: not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE, timeout=60,
             what="the worker to exit")


def _trainer_pids() -> set[int]:
    """Real trainers alive (a process forked by one, sharing its command line, is not another)."""
    found = {}
    for process in psutil.process_iter(["cmdline", "status", "ppid"]):
        if "lanner.training.worker" in (process.info["cmdline"] or []) and \
                process.info["status"] != psutil.STATUS_ZOMBIE:
            found[process.pid] = process.info["ppid"]
    return {pid for pid, parent in found.items() if parent not in found}


@pytest.mark.parametrize("cluster", [{"LANNER_WORKER_PYTHON": None}], indirect=True)  # the real CPU trainer
def test_a_supervisor_killed_mid_run_leaves_its_trainer_to_finish_the_run_once(cluster: Cluster,
                                                                               tmp_path: Path) -> None:
    platform = cluster.platform(cluster.servers[0])
    add_dataset(tmp_path, platform, train=4, val=2)
    model = new_model(platform, "leases", "mid-run")
    supervisor = wait_for(lambda: cluster.leader("lanner-supervisor"), timeout=60, what="a supervisor leader")
    run_id = int(platform.training.start(model_id=model["id"], gpu_type="cpu", train_args={
        "model": "yolo11n.yaml", "data": "ul://alice/datasets/shapes", "epochs": 3, "imgsz": 64, "batch": 4,
        "workers": 0, "plots": False})["runId"])
    seen: set[int] = set()
    peak = 0
    sampling = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not sampling.is_set():
            alive = _trainer_pids()
            seen.update(alive)
            peak = max(peak, len(alive))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    def training() -> Run | None:  # the trainer has reported from inside training: mid-run
        with cluster.db.session() as session:
            run = session.get(Run, run_id)
            return run if run.status == "running" and run.last_event_at and run.external_id else None

    run = wait_for(training, timeout=300, what="the trainer to report", every=0.3)
    trainer = psutil.Process(int(run.external_id.split(":")[0]))
    assert cluster.leader("lanner-supervisor") is supervisor and trainer.ppid() == supervisor.process.pid
    supervisor.process.send_signal(signal.SIGKILL)
    supervisor.process.wait()
    assert trainer.is_running() and trainer.status() != psutil.STATUS_ZOMBIE  # its own session: it lives on
    successor = wait_for(lambda: cluster.leader("lanner-supervisor") not in (None, supervisor) and
                         cluster.leader("lanner-supervisor"), timeout=60, what="another process to take the lease")

    def settled() -> Run | None:
        with cluster.db.session() as session:
            run = session.get(Run, run_id)
            return run if run.settled_at is not None and run.worker_exited_at is not None else None

    run = wait_for(settled, timeout=600, what="the run to end and settle", every=0.5)
    sampling.set()
    sampler.join()
    assert (run.status, run.attempt) == ("completed", 1), (run.status, run.attempt, run.error)
    assert peak == 1 and seen == {trainer.pid}  # never relaunched while (or after) the first trainer lived
    survivor = cluster.platform(successor)
    assert survivor.models.training("alice", "leases", "mid-run")["job"]["status"] == "completed"
    ledger = run_ledger(survivor, run_id)
    expected = charge_for(run.billed_seconds or 0.0, run.price_micros_per_hour or 0, run.gpu_count)
    assert expected > 0 and -sum(ledger["charge"]) - sum(ledger.get("refund", [0])) == expected, ledger
