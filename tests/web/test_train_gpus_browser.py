"""The train dialog's GPU count in a real browser, against a real server whose runs go to a real local Ray head
standing in for a GPU node (one ``lanner-gpu:h100-sxm``): choosing 2 GPUs re-prices and re-estimates the chosen
type and states the scaling assumption; Start queues a Ray job that asks for 2 units, which Ray keeps waiting
for a node that has them. Marked e2e: it starts a Ray head."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from lanner import models_registry  # noqa: F401  (every table: web_server.user writes through the models)
from lanner.synthetic import make_detection_dataset
from tests.ray_cluster import ray_head  # noqa: F401  (the fixture)
from tests.servers import start_server, wait_for
from tests.web.conftest import WebServer, screenshot, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def _estimate(response: Any) -> bool:
    """An htmx re-estimate of the train form (the launch is a plain form post, without the HX-Request header)."""
    return response.url.endswith("/train") and response.request.headers.get("hx-request") == "true"


@pytest.fixture
def web_server(tmp_path: Path, ray_head: str) -> Iterator[WebServer]:  # noqa: F811
    web = WebServer(start_server(tmp_path / "server", LANNER_EXECUTOR="ray", LANNER_RAY_ADDRESS=ray_head,
                                 LANNER_RAY_NUM_GPUS="1", LANNER_RAY_WORKER_DIR=str(tmp_path / "ray-node")))
    yield web
    web.stop()


def test_two_gpus_are_priced_estimated_and_asked_of_ray(page: Any, web_server: WebServer, ray_head: str,  # noqa: F811
                                                        tmp_path: Path) -> None:
    from ray.job_submission import JobSubmissionClient

    alice = web_server.user("alice", credits=50)
    root = make_detection_dataset(tmp_path / "shapes", train=8, val=4, size=64).parent
    web_server.cli("datasets", "import", str(root), "--owner", "alice", "--name", "shapes")
    signed_in(page, alice, "/train")
    expect(page.locator("#chosen-gpu")).to_have_text("NVIDIA H100 SXM5")  # the one type the Ray head offers
    expect(page.locator("#chosen-price")).to_have_text("$3.29/h")
    expect(page.locator("#gpus-note")).to_have_count(0)
    count = page.get_by_label("GPUs", exact=True)
    expect(count).to_have_value("1")
    with page.expect_response(_estimate):
        count.select_option("2")
    expect(page.locator("#chosen-price")).to_have_text("$6.58/h (2 × $3.29)")
    expect(page.locator(".gpu-count dd")).to_have_text(re.compile(r"^×\s*.*GPUs$", re.S))
    expect(page.locator('#gpu-table tr[data-gpu="h100-sxm"]')).to_contain_text("$6.58/h (2 × $3.29)")
    expect(page.locator("#gpus-note")).to_contain_text("2 GPUs are assumed to train 1.70x as fast as one")
    expect(page.get_by_label("GPUs", exact=True)).to_have_value("2")
    screenshot(page, "train-dialog-gpus")
    page.get_by_role("button", name="Start training").click()
    expect(page).to_have_url(re.compile(r"/alice/shapes/yolo11n$"), timeout=60_000)

    job = web_server.api(alice, "GET", "/api/models/alice/shapes/yolo11n/training").json()["job"]
    assert job["compute"]["gpuCount"] == 2
    ray = JobSubmissionClient(ray_head)

    def submitted() -> Any:
        return next((j for j in ray.list_jobs() if (j.submission_id or "").startswith(f"lanner-run-{job['id']}-")),
                    None)

    queued = wait_for(submitted, timeout=60, what="the run's Ray job", every=0.5)
    spec = json.loads(queued.runtime_env["env_vars"]["LANNER_WORKER_SPEC"])
    assert spec["device"] == "0,1"  # the trainer trains on both GPUs Ray makes visible on its node

    def demanded() -> list[Any]:  # what Ray itself reports it waits to place
        report = httpx.get(f"{ray_head}/api/cluster_status", timeout=5).json()["data"]["clusterStatus"]
        return [shape for shape, _ in report["loadMetricsReport"].get("resourceDemand") or []
                if "lanner-gpu:h100-sxm" in shape]

    assert wait_for(demanded, timeout=30, what="Ray's demand for the run", every=0.5) == [
        {"lanner-gpu:h100-sxm": 2.0, "GPU": 2.0, "CPU": 1.0}]
    # The head has one unit: the job never runs (it waits, and after Ray's start timeout Lanner submits it again).
    now = submitted()
    assert (str(now.status).rsplit(".", 1)[-1] == "PENDING"
            or str(now.error_type or "") == "JOB_SUPERVISOR_ACTOR_START_TIMEOUT"), now
    assert web_server.api(alice, "DELETE", "/api/models/alice/shapes/yolo11n/training").status_code == 200
