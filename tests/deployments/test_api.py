"""``deployments.*`` through the official SDK against an app whose supervisor runs real serving processes, on
SQLite and PostgreSQL: create -> ready, the SDK's shapes (checked with typeguard), predict gives the boxes
``models.predict`` and ``YOLO.predict`` give, logs and the three metrics shapes, health, rename, metadata,
stop -> predict 409 -> start -> ready, delete -> the process is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest
from ultralytics import YOLO
from ultralytics_platform import APIError, Platform

from tests.conftest import Account
from tests.deployments.conftest import IMGSZ, TOLERANCE, attach, image_file, wait_status
from tests.sdk_types import assert_sdk_type
from tests.servers import wait_for

EXTENSIONS = {"runtime"}  # Lanner's addition to the SDK's deployment item


def sdk_item(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in EXTENSIONS}


def refused(call: Any) -> APIError:
    with pytest.raises(APIError) as caught:
        call()
    body = caught.value.json
    assert isinstance(body, dict) and isinstance(body.get("error"), str), caught.value.body
    return caught.value


def pid_of(app: Any, deployment_id: str) -> int:
    from lanner.deployments.models import Deployment

    with app.state.lanner.db.session() as session:
        external = session.get(Deployment, deployment_id).external_id
    return int(external.split(":", 1)[0])


def row_exists(app: Any, deployment_id: str) -> bool:
    from lanner.deployments.models import Deployment

    with app.state.lanner.db.session() as session:
        return session.get(Deployment, deployment_id) is not None


def boxes(response: dict[str, Any]) -> list[tuple[int, float, list[float]]]:
    return [(row["class"], row["confidence"], list(row["box"].values())) for row in response["images"][0]["results"]]


def same_boxes(got: list[Any], expected: list[Any]) -> bool:
    return len(got) == len(expected) and all(
        a[0] == b[0] and abs(a[1] - b[1]) <= TOLERANCE and max(abs(x - y) for x, y in zip(a[2], b[2], strict=True))
        <= TOLERANCE for a, b in zip(got, expected, strict=True))


def test_an_endpoint_from_create_to_delete(endpoint_app: Any, owner: Account, platform: Platform,
                                           shapes_detector: Path, tmp_path: Path) -> None:
    attach(endpoint_app, owner, shapes_detector)
    created = platform.deployments.create("alice", project="shapes", model="tiny", deployment="tiny-iowa",
                                          name="Tiny in Iowa", region="us-central1")
    assert_sdk_type(created, "DeploymentsCreateResponse")
    assert created["status"] == "creating" and created["deployment"] == "tiny-iowa"
    image = image_file(tmp_path)
    with image.open("rb") as handle:  # not ready yet: 409, saying what it is doing
        early = refused(lambda: platform.deployments.predict("alice", "tiny-iowa", body={"file": handle}))
    assert early.status_code == 409 and early.json["code"] == "not_ready"

    ready = wait_status(platform, "tiny-iowa", "ready")
    assert_sdk_type({"deployment": sdk_item(ready), "region": "us"}, "DeploymentsRetrieveResponse")
    assert ready["runtime"] == "pytorch" and ready["statusMessage"] == "serving with PyTorch"
    assert ready["serviceUrl"] == "http://testserver/api/deployments/alice/tiny-iowa"
    assert ready["resources"] == {"cpu": 1.0, "memoryGi": 2.0, "minInstances": 1.0, "maxInstances": 1.0}
    listed = platform.deployments.list("alice", status="ready", model="shapes/tiny")
    assert_sdk_type({**listed, "deployments": [sdk_item(d) for d in listed["deployments"]]},
                    "DeploymentsListResponse")
    assert listed["total"] == 1 and listed["deployments"][0]["id"] == created["id"]
    assert platform.deployments.list("alice", model="shapes/other")["total"] == 0

    options = {"conf": 0.01, "iou": 0.6, "imgsz": IMGSZ}
    with image.open("rb") as handle:
        answer = platform.deployments.predict("alice", "tiny-iowa", body={"file": handle, **options})
    assert_sdk_type(answer, "DeploymentsPredictResponse")
    assert answer["metadata"]["model"] == "ul://alice/shapes/tiny" and answer["metadata"]["task"] == "detect"
    with image.open("rb") as handle:
        shared = platform.models.predict("alice", "shapes", "tiny", body={"file": handle, **options})
    local = YOLO(shapes_detector).predict(str(image), verbose=False, **options)[0]
    expected = [(int(c), float(p), b) for c, p, b in zip(local.boxes.cls.tolist(), local.boxes.conf.tolist(),
                                                         local.boxes.xyxy.tolist(), strict=True)]
    assert boxes(answer) and same_boxes(boxes(answer), boxes(shared)) and same_boxes(boxes(answer), expected)

    not_image = refused(lambda: platform.deployments.predict("alice", "tiny-iowa", body={"file": b"plain text"}))
    assert not_image.status_code == 415 and "not an image" in not_image.json["error"]
    bad_conf = refused(lambda: platform.deployments.predict("alice", "tiny-iowa", body={"file": b"x", "conf": 2}))
    assert bad_conf.status_code == 422

    health = platform.deployments.health("alice", "tiny-iowa")
    assert_sdk_type(health, "DeploymentsHealthResponse")
    assert health["healthy"] is True and health["status"] == 200

    def logged() -> dict[str, Any] | None:
        found = platform.deployments.logs("alice", "tiny-iowa")
        return found if sum("httpRequest" in e for e in found["entries"]) == 2 else None

    logs = wait_for(logged, timeout=10, what="the request log")
    assert_sdk_type(logs, "DeploymentsLogsResponse")
    requests = [e for e in logs["entries"] if "httpRequest" in e]
    assert [e["httpRequest"]["status"] for e in requests] == [415.0, 200.0]  # newest first (the 422 never left)
    assert "160x120" in requests[1]["message"] and f"{len(boxes(answer))} results" in requests[1]["message"]
    lifecycle = [e["message"] for e in logs["entries"] if "httpRequest" not in e]
    assert lifecycle[0] == "ready: serving with PyTorch" and lifecycle[-1].startswith("created:")
    errors_only = platform.deployments.logs("alice", "tiny-iowa", severity="WARNING,ERROR", limit=1)
    assert [e["httpRequest"]["status"] for e in errors_only["entries"]] == [415.0]
    page = platform.deployments.logs("alice", "tiny-iowa", limit=2)
    after = platform.deployments.logs("alice", "tiny-iowa", limit=2, page_token=page["nextPageToken"])
    assert after["entries"][0] == logs["entries"][2]

    full = platform.deployments.metrics("alice", "tiny-iowa", range="1h")
    assert_sdk_type(full, "DeploymentsMetricsResponse")
    assert full["summary"]["totalRequests"] == 2 and full["summary"]["errorCount"] == 1
    assert full["summary"]["errorRate"] == 0.5 and len(full["timeSeries"]["requests"]) == 60
    assert sum(p["value"] for p in full["timeSeries"]["requests"]) == 2
    overview = platform.deployments.metrics("alice", "tiny-iowa", range="24h", view="overview")
    assert_sdk_type(overview, "DeploymentsMetricsResponse")
    assert set(overview["timeSeries"]) == {"requests", "errors", "latencyP95"}
    sparkline = platform.deployments.metrics("alice", "tiny-iowa", sparkline="true")
    assert_sdk_type(sparkline, "DeploymentsMetricsResponse")
    assert len(sparkline["requests24h"]) == 24 and sparkline["totalRequests"] == 2

    renamed = platform.deployments.update("alice", "tiny-iowa", body={"name": "Tiny Shapes"})
    assert_sdk_type(renamed, "DeploymentsUpdateResponse")
    assert renamed["deployment"] == "tiny-shapes"
    platform.deployments.update("alice", "tiny-shapes", body={"metadata": {"team": "vision"}})
    assert platform.deployments.retrieve("alice", "tiny-shapes")["deployment"]["metadata"] == {"team": "vision"}
    assert refused(lambda: platform.deployments.retrieve("alice", "tiny-iowa")).status_code == 404

    pid = pid_of(endpoint_app, created["id"])
    stopping = platform.deployments.update("alice", "tiny-shapes", body={"action": "stop"})
    assert stopping["status"] == "stopping"
    wait_status(platform, "tiny-shapes", "stopped", timeout=30)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with image.open("rb") as handle:
        stopped = refused(lambda: platform.deployments.predict("alice", "tiny-shapes", body={"file": handle}))
    assert stopped.status_code == 409 and "stopped" in stopped.json["error"]
    assert platform.deployments.health("alice", "tiny-shapes")["healthy"] is False

    assert platform.deployments.update("alice", "tiny-shapes", body={"action": "start"})["status"] == "deploying"
    wait_status(platform, "tiny-shapes", "ready")
    with image.open("rb") as handle:
        again = platform.deployments.predict("alice", "tiny-shapes", body={"file": handle, **options})
    assert same_boxes(boxes(again), boxes(answer))

    pid = pid_of(endpoint_app, created["id"])
    assert_sdk_type(platform.deployments.delete("alice", "tiny-shapes"), "DeploymentsDeleteResponse")
    assert refused(lambda: platform.deployments.retrieve("alice", "tiny-shapes")).status_code == 404
    assert platform.deployments.list("alice")["total"] == 0
    wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
             timeout=20, what=f"the serving process {pid} to end")
    wait_for(lambda: not row_exists(endpoint_app, created["id"]), timeout=20, what="the deleted row to go")
