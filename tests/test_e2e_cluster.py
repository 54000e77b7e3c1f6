"""Past one machine (issue 30), end to end: two API hosts that share no folder, each ``lanner serve --workers 2``
with its own LANNER_HOME, on one PostgreSQL, one S3 endpoint (moto's server) and one Redis, with the same
LANNER_SECRET_KEY. A dataset uploaded through host A with the official SDK is browsed, cloned, trained on (the
local executor's real trainer), exported to ONNX and predicted with through host B alone; every byte goes to
and comes from the bucket, so neither home gets a blob. And the issue's done-when: eight runs started at once
through both hosts run at most ``LANNER_LOCAL_MAX_RUNS=2`` at a time across all four processes (the limit is
the cluster's: docs/deploy.md), each with one charge writer."""

from __future__ import annotations

import hashlib
import itertools
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from ultralytics_platform import Platform

from lanner.datasets.images import make_thumbnail
from lanner.db import Database
from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset
from tests.pg import PostgresCluster
from tests.redis_server import running_redis
from tests.sdk_types import assert_sdk_type
from tests.servers import Server, lanner_cli, start_server, wait_for
from tests.storage.moto import moto_server, new_bucket, s3_env
from tests.training.orchestration import add_dataset, assert_metered_once, eight_runs_at_once, new_model

pytestmark = pytest.mark.e2e
_databases = itertools.count()
IMGSZ = 64
STAND_IN = "stand-in"  # a setting's value the fixture replaces with the path of a worker that lives 3 s


@dataclass
class Hosts:
    a: Server
    b: Server
    key: str
    moto: str
    url: str  # the database's
    stand_in: Path


@pytest.fixture
def hosts(postgres: PostgresCluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Hosts]:
    """Hosts A and B; ``request.param`` (indirect parametrization) adds settings to both."""
    name = f"lanner_cluster_{next(_databases)}"
    postgres.execute(f"CREATE DATABASE {name} TEMPLATE lanner_template")
    url = postgres.url(name)
    homes = [tmp_path / "host-a", tmp_path / "host-b"]
    for home in homes:
        home.mkdir()
    database = {"LANNER_DATABASE_URL": url, "LANNER_SECRET_KEY": secrets.token_hex(32)}
    lanner_cli(homes[0], "users", "create", "alice", "--tier", "pro", **database)
    key = lanner_cli(homes[0], "keys", "create", "alice", **database)
    lanner_cli(homes[0], "credits", "add", "alice", "50", **database)
    stand_in = tmp_path / "worker-stand-in"
    stand_in.write_text("#!/bin/sh\nsleep 3\n")
    stand_in.chmod(0o755)
    extra = {k: str(stand_in) if v == STAND_IN else v for k, v in getattr(request, "param", {}).items()}
    with moto_server(tmp_path / "moto.log") as endpoint, running_redis(tmp_path / "redis") as redis_server:
        shared = {**database, "LANNER_REDIS_URL": redis_server.url, "LANNER_SUPERVISOR_INTERVAL_SECONDS": "0.5",
                  "LANNER_EXPORT_POLL_SECONDS": "0.5", **s3_env(endpoint, new_bucket(endpoint)), **extra}
        servers: list[Server] = []
        try:
            for home in homes:
                servers.append(start_server(home, serve_args=("--workers", "2"), **shared))
            yield Hosts(servers[0], servers[1], key, endpoint, url, stand_in)
        finally:
            for server in servers:
                server.stop()


def _blob_files(home: Path) -> list[Path]:
    blobs = home / "blobs"
    return [p for p in blobs.rglob("*") if p.is_file() and p.parent.name != "tmp"] if blobs.exists() else []


def _finished(platform: Platform, get: Any, until: tuple[str, ...], timeout: float, what: str) -> dict[str, Any]:
    return wait_for(lambda: (value := get()) and value["status"] in until and value, timeout=timeout, what=what,
                    every=1)


def test_an_upload_through_one_host_is_browsed_cloned_trained_exported_and_predicted_through_the_other(
        hosts: Hosts, tmp_path: Path) -> None:
    started = time.monotonic()
    a = Platform(base_url=hosts.a.url, api_key=hosts.key, timeout=60)
    b = Platform(base_url=hosts.b.url, api_key=hosts.key, timeout=60)
    archive = package(make_detection_dataset(tmp_path / "shapes", train=8, val=4, size=96).parent, tmp_path / "zip")
    with httpx.Client(timeout=60) as http:
        uploaded = upload_dataset(a, http, "alice", "shapes", archive)
    assert uploaded["status"] == "ready" and uploaded["imageCount"] == 12, uploaded

    # Browse through B: the links point at the bucket, and the bytes are the ones uploaded through A.
    images = b.datasets.images("alice", "shapes", limit=3, include_image_urls="true",
                               include_thumbnails="true")["images"]
    assert len(images) == 3
    for image in images:
        assert image["imageUrl"].startswith(hosts.moto) and image["thumbnailUrl"].startswith(hosts.moto), image
        original = httpx.get(image["imageUrl"], timeout=30).content
        assert hashlib.sha256(original).hexdigest() == image["hash"]
        (tmp_path / "original").write_bytes(original)
        thumbnail = httpx.get(image["thumbnailUrl"], timeout=30)
        assert thumbnail.status_code == 200 and thumbnail.content == make_thumbnail(tmp_path / "original")
    sample = httpx.get(images[0]["imageUrl"], timeout=30).content

    b.datasets.clone("alice", "shapes", name="copy")
    copy = b.datasets.retrieve("alice", "copy")["dataset"]
    assert copy["status"] == "ready" and copy["imageCount"] == 12, copy

    # Train on the clone through B: the local executor's trainer, started by whichever process holds the
    # supervisor's lease on either host, fetches the dataset and sends its weights by presigned links.
    b.projects.create(owner="alice", project="cluster", name="cluster", visibility="private")
    target = b.models.create(body={"project": "cluster", "model": "tiny", "name": "tiny"})
    b.training.start(model_id=target["id"], gpu_type="cpu",
                     train_args={"model": "yolo11n.yaml", "data": "ul://alice/datasets/copy", "epochs": 1,
                                 "imgsz": IMGSZ, "batch": 4, "workers": 0, "plots": False})
    job = _finished(b, lambda: b.models.training("alice", "cluster", "tiny")["job"], ("completed", "failed"),
                    600, "the run to finish")
    assert job["status"] == "completed", job
    files = b.models.files("alice", "cluster", "tiny")["files"]
    assert files and files[0]["downloadUrl"].startswith(hosts.moto), files

    export = b.exports.create("alice", "cluster", "tiny", format="onnx", args={"imgsz": IMGSZ})
    done = _finished(b, lambda: b.exports.retrieve("alice", "cluster", "tiny", export["id"])["export"],
                     ("completed", "failed", "cancelled"), 300, "the ONNX export")
    assert done["status"] == "completed", done.get("error")
    assert done["file"]["downloadUrl"].startswith(hosts.moto), done["file"]
    onnx = httpx.get(done["file"]["downloadUrl"], timeout=60)
    assert onnx.status_code == 200 and len(onnx.content) == done["file"]["size"] > 100_000

    predicted = b.models.predict("alice", "cluster", "tiny", body={"file": ("sample.jpg", sample), "conf": 0.01,
                                                                   "imgsz": IMGSZ})
    assert_sdk_type(predicted, "ModelsPredictResponse")
    assert len(predicted["images"]) == 1 and isinstance(predicted["images"][0]["results"], list), predicted

    for server in (hosts.a, hosts.b):
        assert _blob_files(server.home) == [], server.home  # the bytes are in the bucket
    # The trainer and the exporter ran in whichever host's process held their loop's lease (the first host to
    # start, unless a lease moved): B predicted with weights it never had on its disk.
    ran = {name: [h for h, server in (("A", hosts.a), ("B", hosts.b)) if (server.home / name).exists()]
           for name in ("runs", "exports")}
    print(f"upload on A to prediction on B: {time.monotonic() - started:.0f} s; trainer and exporter on {ran}")


# The local executor's worker program is a stand-in that lives 3 s (tests/test_e2e_leases.py: the bound is on
# processes alive, whatever they run; eight real trainers would only make it slower to test): it exits without a
# result, so each run fails, as a crashed trainer's would, and is settled to its billed seconds. A meter interval
# of 10 minutes: one writer meters a run at most once before its settlement.
@pytest.mark.parametrize("hosts", [{"LANNER_LOCAL_MAX_RUNS": "2", "LANNER_WORKER_PYTHON": STAND_IN,
                                    "LANNER_METER_INTERVAL_SECONDS": "600"}], indirect=True)
def test_max_runs_hold_across_both_hosts_four_processes_with_one_charge_writer_per_run(hosts: Hosts,
                                                                                      tmp_path: Path) -> None:
    servers = (hosts.a, hosts.b)
    for server in servers:  # two hosts of two serving processes each
        assert len(psutil.Process(server.process.pid).children()) >= 2, server.log.read_text()
    a, b = (Platform(base_url=server.url, api_key=hosts.key, timeout=60) for server in servers)
    add_dataset(tmp_path, a, train=4, val=2)
    models = [new_model(a, "limits", f"m{n}") for n in range(8)]
    db = Database(hosts.url)
    try:
        # Each host's two processes share its port: either may answer a start.
        peak, leaders, runs = eight_runs_at_once(db, [a, b], models, hosts.stand_in, imgsz=32)
        assert 1 <= peak <= 2, f"{peak} workers alive at once across both hosts with LANNER_LOCAL_MAX_RUNS=2"
        assert_metered_once(b, runs, leaders)
        launched_by = {server.home.name for server in servers if (server.home / "runs").exists()}
    finally:
        db.dispose()
    print(f"workers alive at once across 2 hosts x 2 processes, sampled every 50 ms: at most {peak}; "
          f"launched on {sorted(launched_by)}; supervisor leaders seen: {len(leaders - {''})}")
