"""A dedicated endpoint on the distributed engine: the real ``lanner serve`` sends the ``us-central1`` region to
Ray (``LANNER_DEPLOY_REGIONS``), and a real local Ray head started by the test runs it as a Ray Serve
application (deployed by a Ray Job) with the deployment's resources as the replica's ``ray_actor_options``
and its autoscaling bounds; predicts (several at once, batched by ``@serve.batch``) give the boxes
``models.predict`` gives; deleting it deletes the application."""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from ultralytics_platform import Platform

from tests.deployments.conftest import IMGSZ, image_file, wait_status
from tests.deployments.test_e2e_local import server_context
from tests.ray_cluster import ray_head  # noqa: F401  (the fixture)
from tests.servers import free_port, lanner_cli, start_server, wait_for
from tests.trained import attach_weights

pytestmark = pytest.mark.e2e
pytest.importorskip("ray.serve")
from lanner.deployments.ray_app import REPLICA_HOME  # noqa: E402  (needs ray.serve)


def applications(dashboard: str) -> dict[str, Any]:
    return httpx.get(f"{dashboard}/api/serve/applications/", timeout=10).json().get("applications") or {}


def test_a_deployment_runs_as_a_ray_serve_application(tmp_path: Path, shapes_detector: Path,
                                                      ray_head: str) -> None:  # noqa: F811
    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    serve_url = f"http://127.0.0.1:{free_port()}"
    server = start_server(home, LANNER_ENDPOINT_POLL_SECONDS="0.5", LANNER_SUPERVISOR_INTERVAL_SECONDS="0",
                          LANNER_MAINTENANCE_INTERVAL_SECONDS="0", LANNER_RAY_ADDRESS=ray_head,
                          LANNER_RAY_SERVE_URL=serve_url,
                          LANNER_DEPLOY_REGIONS='{"us-central1": "ray", "europe-west4": "local"}')
    app = server_context(home, server.url)
    temporary = Path(tempfile.gettempdir())
    per_replica_before = set(temporary.glob("lanner-endpoint-*"))
    try:
        attach_weights(app, SimpleNamespace(username="alice"), shapes_detector)
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        created = platform.deployments.create("alice", project="shapes", model="tiny", deployment="tiny-ray",
                                              name="On Ray", region="us-central1", cpu=1, memory_gi=2)
        ready = wait_status(platform, "tiny-ray", "ready", timeout=300)
        assert ready["runtime"] == "pytorch" and ready["resources"]["cpu"] == 1.0

        name = f"lanner-{created['id']}"
        found = applications(ray_head)[name]
        assert found["status"] == "RUNNING" and found["route_prefix"] == f"/lanner/{created['id']}"
        (details,) = found["deployments"].values()
        config = details["deployment_config"]
        assert config["ray_actor_options"]["num_cpus"] == 1.0
        assert config["ray_actor_options"]["memory"] == 2 * 1024**3
        assert config["autoscaling_config"]["min_replicas"] == 1 and config["autoscaling_config"]["max_replicas"] == 1
        assert [r["state"] for r in details["replicas"]] == ["RUNNING"]
        # The replica loaded its weights in the node's shared folder and left nothing there or anywhere else.
        assert set(temporary.glob("lanner-endpoint-*")) == per_replica_before
        assert not [p for p in (temporary / REPLICA_HOME / "tmp").iterdir() if p.name.startswith("inference-")]

        image = image_file(tmp_path)
        options = {"conf": 0.01, "iou": 0.6, "imgsz": IMGSZ}

        def predict(_: int) -> list[Any]:
            with image.open("rb") as handle:
                return platform.deployments.predict("alice", "tiny-ray", body={"file": handle, **options})[
                    "images"][0]["results"]

        with ThreadPoolExecutor(8) as pool:  # requests together: @serve.batch runs them as batches
            answers = list(pool.map(predict, range(16)))
        with image.open("rb") as handle:
            shared = platform.models.predict("alice", "shapes", "tiny", body={"file": handle, **options})
        assert answers[0] and all(a == shared["images"][0]["results"] for a in answers)
        health = platform.deployments.health("alice", "tiny-ray")
        assert health["healthy"] is True
        direct = httpx.get(f"{serve_url}/lanner/{created['id']}/health", timeout=10).json()
        assert direct["runtime"] == "pytorch" and direct["model"] == "ul://alice/shapes/tiny"

        platform.deployments.delete("alice", "tiny-ray")
        wait_for(lambda: name not in applications(ray_head), timeout=120, what="the Serve application to go")
    finally:
        server.stop()
        app.state.lanner.db.dispose()
