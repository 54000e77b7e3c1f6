"""One user who owns one of everything, built through the API the way clients do: the fuzz test, the route
matrix and ``benchmarks/fuzz_api.py`` aim their identifiers at these rows.

Everything is private (a public dataset is legitimately readable by others) and named distinctively, so a
response that leaks it can be recognised by its identifiers alone.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select
from ultralytics_platform import Platform

from lanner.accounts import service as accounts_service
from lanner.app import create_app
from lanner.billing import service as billing_service
from lanner.config import Settings
from lanner.datasets.models import Dataset, DatasetItem
from lanner.integrations import crypto
from lanner.integrations.models import BucketImport, BucketObject, StorageIntegration
from lanner.synthetic import make_detection_dataset
from tests.conftest import GENEROUS_LIMITS, TEST_URL
from tests.datasets.helpers import package, upload_dataset

DATASET, OLD_DATASET, PROJECT, MODEL = "alices-private-data", "alices-old-data", "alices-project", "alices-model"
DEPLOYMENT = "alices-endpoint"


WORLD_SECRETS_KEY = Fernet.generate_key().decode()  # seals the world's bucket credentials


def quiet_settings(home: Path, database_url: str, **overrides: Any) -> Settings:
    """Settings for an in-process app whose background loops never start a trainer or collect anything."""
    return Settings(home=home, database_url=database_url, public_url=TEST_URL, secret_key="test-secret",
                    secrets_key=WORLD_SECRETS_KEY,
                    api_key_cache_seconds=0, supervisor_interval_seconds=0, maintenance_interval_seconds=0,
                    export_poll_seconds=0, endpoint_poll_seconds=0, embedding_poll_seconds=0,
                    **{**GENEROUS_LIMITS, **overrides})


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app as it is served (built once at collection: no database needed)."""
    with tempfile.TemporaryDirectory() as home:
        app = create_app(quiet_settings(Path(home), f"sqlite:///{home}/lanner.db"), migrate=False)
        return app.openapi()


def operations(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (METHOD, path) of the document, in its order."""
    return [(method.upper(), path) for path, item in document["paths"].items() for method in item
            if method in ("get", "put", "post", "delete", "patch", "head", "options")]


@dataclass
class User:
    username: str
    user_id: str
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def make_user(app: FastAPI, username: str, *, credits_micros: int = 0) -> User:
    with app.state.lanner.db.session() as session:
        user = accounts_service.create_user(session, username=username, password="correct horse battery")
        if credits_micros:
            billing_service.top_up(session, user_id=user.id, micros=credits_micros, description="test credit")
        _, key = accounts_service.create_api_key(session, user=user, name="main")
        return User(user.username, user.id, key)


@dataclass
class Owned:
    """What ``build`` made for one user: the identifiers others must not reach."""

    user: User
    workspace: str = ""  # where the resources are: the user's own, or a team of theirs
    dataset_id: str = ""
    old_dataset_id: str = ""  # in the trash
    image_id: str = ""
    version: int = 0
    model_id: str = ""
    run_id: int = 0
    key_id: str = ""  # a second API key, not the one requests use
    session_id: str = ""  # a completed upload session, ready to ingest
    checkpoint_path: str = ""  # a staged checkpoint upload
    export_id: str = ""  # a queued export of the model (never run: the export queue is off)
    deployment_id: str = ""  # a deployment of the model (never launched: the endpoint supervisor is off)
    team: str = ""  # a team the user owns (its only member)
    invitation_id: str = ""  # the team's pending invitation
    integration_id: str = ""  # a connected bucket (made in the database: no bucket is reached)
    bucket_import_id: str = ""  # a bucket import of the dataset (failed: never run)
    workflow_id: str = ""  # a workflow collecting the deployment's uncertain predictions into the dataset
    values: dict[str, Any] = field(default_factory=dict)

    def secrets(self) -> list[str]:
        """Strings that only a leak of this user's private resources would put in another user's response."""
        return [self.dataset_id, self.old_dataset_id, self.image_id, self.model_id, self.key_id, self.session_id,
                self.export_id, self.deployment_id, self.integration_id, self.bucket_import_id, self.workflow_id,
                BUCKET_KEY_ID,
                self.team, DATASET, OLD_DATASET, PROJECT, MODEL, DEPLOYMENT]


def build(app: FastAPI, client: TestClient, user: User, work: Path, *, team: str | None = None) -> Owned:
    """A private dataset with images and a version, one in the trash, a project with a model that has a run
    (started through the trainer's webhook: no process runs) and weights uploaded for it, a queued export of it,
    a deployment of it (never launched), a workflow collecting its uncertain predictions into the dataset,
    a staged checkpoint, a completed upload session, a second API key, and a team with an open invitation.

    With ``team`` (one the user owns), the resources are made in the team's workspace by the user, and the team
    is that one."""
    ws = team or user.username
    owned = Owned(user, workspace=ws)
    platform = Platform(api_key=user.key, base_url=TEST_URL, http_client=client, max_retries=0)
    archive = package(make_detection_dataset(work / "shapes", train=4, val=2, size=64).parent, work / "zip")
    if team:
        _ok(client.post("/api/datasets", json={"name": DATASET, "owner": ws}, headers=user.headers))
    owned.dataset_id = upload_dataset(platform, client, ws, DATASET, archive, create=not team)["id"]
    owned.version = _ok(client.post(f"/api/datasets/{ws}/{DATASET}/export", json={},
                                    headers=user.headers))["version"]
    owned.image_id = _ok(client.get(f"/api/datasets/{ws}/{DATASET}/images?limit=1",
                                    headers=user.headers))["images"][0]["id"]
    owned.old_dataset_id = _ok(client.post("/api/datasets", json={
        "name": OLD_DATASET, "visibility": "private", "owner": ws}, headers=user.headers))["id"]
    _ok(client.delete(f"/api/datasets/{ws}/{OLD_DATASET}", headers=user.headers))
    _ok(client.post("/api/projects", json={"name": PROJECT, "visibility": "private", "owner": ws},
                    headers=user.headers))
    owned.model_id = _ok(client.post("/api/models", json={"project": PROJECT, "model": MODEL, "name": MODEL,
                                                          "owner": ws}, headers=user.headers))["id"]
    started = _ok(client.post("/api/webhooks/training/metrics", headers=user.headers, json={
        "event": "training_started", "modelId": owned.model_id, "data": {"epochs": 3, "device": "cpu"}}))
    owned.run_id = started["runId"]
    _ok(client.post("/api/webhooks/training/metrics", headers=user.headers, json={
        "event": "epoch_end", "modelId": owned.model_id, "data": {"epoch": 0, "metrics": {"loss": 1.0}}}))
    staged = _ok(client.post("/api/webhooks/models/upload", headers=user.headers, json={
        "modelId": owned.model_id, "runId": owned.run_id, "filename": "last.pt"}))
    owned.checkpoint_path = staged["uploadPath"]
    weights = _ok(client.post("/api/upload/signed-url", headers=user.headers, json={
        "assetType": "models", "assetId": owned.model_id, "filename": "weights.pt", "totalBytes": 7}))
    _ok(client.put(weights["uploadUrl"], content=b"weights"))
    _ok(client.post("/api/upload/complete", json={"sessionId": weights["sessionId"]}, headers=user.headers))
    owned.export_id = _ok(client.post(f"/api/models/{ws}/{PROJECT}/{MODEL}/exports", headers=user.headers,
                                      json={"format": "torchscript"}))["id"]
    owned.deployment_id = _ok(client.post(f"/api/deployments/{ws}", headers=user.headers, json={
        "project": PROJECT, "model": MODEL, "deployment": DEPLOYMENT, "name": DEPLOYMENT,
        "region": "us-central1"}))["id"]
    workflow = _ok(client.put("/api/workflows", params={"owner": ws}, headers=user.headers, json={
        "name": "collect", "version": 0, "graph": {"templateId": "collect-uncertain", "nodes": [
            {"id": "d", "data": {"label": "d", "type": "Deployment", "config": {"deployment": DEPLOYMENT}}},
            {"id": "q", "data": {"label": "q", "type": "Dataset", "config": {"dataset": DATASET}}}],
            "edges": [{"id": "e", "source": "d", "target": "q"}]}}))
    assert workflow["errors"] == [], workflow  # active: it would collect, were the deployment ever ready
    owned.workflow_id = workflow["id"]
    owned.key_id = _ok(client.post("/api/api-keys", json={"name": "spare"}, headers=user.headers))["keyId"]
    signed = _ok(client.post("/api/upload/signed-url", headers=user.headers, json={
        "assetType": "datasets", "assetId": owned.dataset_id, "filename": "more.zip", "totalBytes": 3}))
    _ok(client.put(signed["uploadUrl"], content=b"zip"))
    _ok(client.post("/api/upload/complete", json={"sessionId": signed["sessionId"]}, headers=user.headers))
    owned.session_id = signed["sessionId"]
    owned.team = team or _ok(client.post("/api/teams", json={"name": f"{user.username}-crew"},
                                         headers=user.headers))["team"]["username"]
    owned.invitation_id = _ok(client.post(f"/api/teams/{owned.team}/invitations", json={"role": "editor"},
                                          headers=user.headers))["id"]
    owned.integration_id, owned.bucket_import_id = _bucket(app, user, owned.dataset_id, owned.image_id)
    return owned


BUCKET_KEY_ID = "AKIAWORLDBUCKETKEY"


def _bucket(app: FastAPI, user: User, dataset_id: str, image_id: str) -> tuple[str, str]:
    """A connected bucket, a failed import from it, and the image ``image_id`` standing for an object in it,
    written straight to the database: connecting through the API would reach the bucket. Its endpoint is a
    private address, so a caller who gets past the permission check is refused by the endpoint guard (400)
    before any connection."""
    ctx = app.state.lanner
    with ctx.db.session() as session:
        row = StorageIntegration(owner_id=user.user_id, provider="s3", identity=BUCKET_KEY_ID,
                                 targets=["world-bucket"], endpoint="https://10.255.0.1",
                                 secret=crypto.seal(ctx.settings, {"accessKeyId": BUCKET_KEY_ID,
                                                                   "secretAccessKey": "world-secret"}))
        session.add(row)
        session.flush()
        job = BucketImport(dataset_id=dataset_id, owner_id=user.user_id, integration_id=row.id,
                           target="world-bucket", status="failed", error="never run")
        session.add(job)
        sha256 = session.scalar(select(DatasetItem.sha256).where(DatasetItem.key == image_id.rpartition("-")[2]))
        workspace = session.get(Dataset, dataset_id).owner_id  # the team's, for a team's dataset
        session.add(BucketObject(owner_id=workspace, integration_id=row.id, target="world-bucket",
                                 key="images/a.jpg", etag='"world"', size=1, sha256=sha256))
        session.flush()
        return row.id, job.id


def _ok(response: Any) -> Any:
    assert response.status_code < 300, f"{response.request.method} {response.request.url}: {response.text}"
    return response.json()
