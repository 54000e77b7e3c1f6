"""The daily cap under concurrency, on SQLite and PostgreSQL: eight captures of eight different images racing on
threads for a cap of three leave exactly three images in the dataset and the counter at three (one conditional
UPDATE per claim). A deleted dataset stops collecting."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient
from ultralytics_platform import Platform

from tests.conftest import Account
from tests.inference.conftest import encoded, shapes_image
from tests.workflows.test_workflows_sdk import collect_graph

ROWS = [{"name": "square", "class": 1, "confidence": 0.4, "box": {"x1": 10.0, "y1": 10.0, "x2": 50.0, "y2": 40.0}}]


def deployment_row(app: Any, account: Account) -> None:
    """A deployment of ``account`` that is never launched: the collector only needs it to exist."""
    from lanner.deployments.models import Deployment

    with app.state.lanner.db.session() as session:
        session.add(Deployment(owner_id=account.user_id, project_slug="shapes", model_slug="tiny", slug="cam",
                               name="cam", region="us-central1", backend="local", weights_sha256="0" * 64,
                               artefact_sha256="0" * 64))


def test_racing_captures_never_pass_the_daily_cap(app: Any, client: TestClient, alice: Account,
                                                  sdk: Callable[[Account], Platform]) -> None:
    from lanner.workflows.models import Workflow

    deployment_row(app, alice)
    assert client.post("/api/datasets", json={"name": "queue"}, headers=alice.headers).status_code in (200, 201)
    saved = sdk(alice).agents.save(name="c", version=0, graph=collect_graph("cam", "queue", rate=1.0, dailyCap=3.0))
    assert saved["errors"] == []
    collector = app.state.workflows
    collector.clock = lambda: datetime(2026, 12, 6, 23, 59, tzinfo=UTC)
    images = [encoded(shapes_image(160, 120, seed=seed)) for seed in range(8)]
    with ThreadPoolExecutor(8) as pool:
        outcomes = Counter(pool.map(lambda data: collector.capture(saved["id"], data, ROWS, [120, 160], False),
                                    images))
    assert outcomes == {"captured": 3, "capped": 5}
    listed = client.get("/api/datasets/alice/queue/images", headers=alice.headers).json()
    assert len(listed["images"]) == 3
    with app.state.lanner.db.session() as session:
        row = session.get(Workflow, saved["id"])
        assert (row.captured_day, row.captured_today, row.captured_total) == ("2026-12-06", 3, 3)

    assert client.delete("/api/datasets/alice/queue", headers=alice.headers).status_code == 200
    collector.clock = lambda: datetime(2026, 12, 7, 0, 1, tzinfo=UTC)
    assert collector.capture(saved["id"], images[7], ROWS, [120, 160], False) == "inactive"
    assert collector.capture(saved["id"], b"not an image", ROWS, [120, 160], False) == "not_an_image"
