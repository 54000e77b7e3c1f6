"""Fixtures of the dedicated-endpoint tests: an app whose endpoint supervisor runs real serving processes (and
kills those it started when the test ends), the tiny detector attached to alice, and its ONNX export.

- ``shapes_detector`` (``tests/inference/conftest.py``): the tiny trained detector with lifted scores, so the
  hosted minimum ``conf`` finds boxes;
- ``shapes_onnx``: that detector exported to ONNX at 64 px (once per session, in this process);
- ``attach_onnx(app, model_id, path)``: a completed ``onnx`` export of the model's current weights, as the export
  worker leaves one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from ultralytics_platform import Platform

from lanner.config import Settings
from tests.conftest import TEST_URL, Account
from tests.inference.conftest import attach, encoded, shapes_detector, shapes_image  # noqa: F401  (fixtures)
from tests.servers import wait_for

IMGSZ = 64  # the tiny detector's training size
TOLERANCE = 1e-3


def kill_endpoints(app: Any) -> None:
    """Kill the serving processes this app's supervisor launched (by their pid and start time)."""
    from sqlalchemy import select

    from lanner.deployments.models import Deployment

    runtime = app.state.deployments
    with app.state.lanner.db.session() as session:
        launched = [(backend, external) for backend, external in session.execute(
            select(Deployment.backend, Deployment.external_id).where(Deployment.external_id.is_not(None)))]
    for backend, external in launched:
        if backend == "local" and not external.startswith("launching:"):
            runtime.supervisor.backend("local").executor.kill(external.removeprefix("retiring:"))


@pytest.fixture
def endpoint_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"endpoint_poll_seconds": 0.3, "supervisor_interval_seconds": 0,
                                       "maintenance_interval_seconds": 0, "export_poll_seconds": 0})


@pytest.fixture
def endpoint_app(endpoint_settings: Settings) -> Iterator[Any]:
    from lanner.app import create_app

    app = create_app(endpoint_settings)
    yield app
    kill_endpoints(app)
    app.state.lanner.db.dispose()


@pytest.fixture
def endpoint_client(endpoint_app: Any) -> Iterator[TestClient]:
    with TestClient(endpoint_app) as client:
        yield client


@pytest.fixture
def owner(endpoint_app: Any, endpoint_client: TestClient) -> Account:
    from lanner.accounts import service as accounts_service

    with endpoint_app.state.lanner.db.session() as session:
        user = accounts_service.create_user(session, username="alice")
        _, key = accounts_service.create_api_key(session, user=user)
    return Account("alice", user.id, key, {"Authorization": f"Bearer {key}"})


@pytest.fixture
def platform(owner: Account, endpoint_client: TestClient) -> Platform:
    return Platform(api_key=owner.key, base_url=TEST_URL, http_client=endpoint_client, max_retries=0)


@pytest.fixture(scope="session")
def shapes_onnx(shapes_detector: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    # torch and Ultralytics cost seconds to import: only the tests that export pay it
    import shutil

    from ultralytics import YOLO

    folder = tmp_path_factory.mktemp("shapes-onnx")
    weights = Path(shutil.copyfile(shapes_detector, folder / "tiny.pt"))
    return Path(YOLO(weights).export(format="onnx", imgsz=IMGSZ, verbose=False))


def attach_onnx(app: Any, model_id: str, path: Path, args: dict[str, Any] | None = None) -> str:
    from lanner.db import utcnow
    from lanner.exports.models import ModelExport
    from lanner.exports.service import fingerprint
    from lanner.projects.models import ModelRecord

    ctx = app.state.lanner
    args = {"imgsz": IMGSZ} if args is None else args
    with path.open("rb") as handle:
        stored = ctx.blobs.put_file(handle)
    with ctx.db.session() as session:
        record = session.get(ModelRecord, model_id)
        job = ModelExport(model_id=model_id, owner_id=record.owner_id, format="onnx", args=args, gpu_type="cpu",
                          fingerprint=fingerprint(record.weights_sha256, "onnx", args, "cpu"), status="completed",
                          filename=f"{record.slug}.onnx", sha256=stored.sha256, size=stored.size,
                          started_at=utcnow(), completed_at=utcnow())
        session.add(job)
        session.flush()
        return job.id


def wait_status(platform: Platform, name: str, wanted: str, *, timeout: float = 90, owner: str = "alice") -> dict:
    def check() -> dict | None:
        found = platform.deployments.retrieve(owner, name)["deployment"]
        assert found["status"] != "failed" or wanted == "failed", found
        return found if found["status"] == wanted else None

    return wait_for(check, timeout=timeout, what=f"{name} to be {wanted}")


def image_file(folder: Path, seed: int = 5) -> Path:
    path = folder / f"shapes-{seed}.jpg"
    path.write_bytes(encoded(shapes_image(160, 120, seed=seed)))
    return path
