"""Helpers for dataset tests: the official SDK upload flow, exactly as ``ul cloud train`` drives it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ultralytics_platform.cli import package_dataset

from lanner.accounts import service as accounts_service
from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.datasets import service as datasets_service
from lanner.datasets.imports import jobs as import_jobs
from lanner.datasets.imports.ingest import commit_import, prepare_import
from lanner.datasets.models import Dataset
from lanner.synthetic import make_detection_dataset
from tests.sdk_types import assert_sdk_type


def upload_dataset(platform: Any, http: Any, owner: str, slug: str, archive: Path, *, create: bool = True,
                   timeout: float = 180) -> dict[str, Any]:
    """datasets.create → upload.signed_url → PUT → upload.complete → datasets.ingest → poll until not processing."""
    if create:
        created = assert_sdk_type(platform.datasets.create(dataset=slug, name=slug, visibility="private"),
                                  "DatasetsCreateResponse")
        dataset_id = created["id"]
    else:
        dataset_id = platform.datasets.retrieve(owner, slug)["dataset"]["id"]
    signed = platform.upload.signed_url(body={"assetType": "datasets", "assetId": dataset_id,
                                              "filename": archive.name, "contentType": "application/octet-stream",
                                              "totalBytes": archive.stat().st_size})
    response = http.put(signed["uploadUrl"], content=archive.read_bytes(), headers=signed.get("headers") or {})
    assert response.status_code == 200, response.text
    assert_sdk_type(signed, "UploadSignedUrlResponse")
    assert_sdk_type(platform.upload.complete(session_id=signed["sessionId"]), "UploadCompleteResponse")
    queued = assert_sdk_type(platform.datasets.ingest(owner, slug, body={"sessionId": signed["sessionId"]}),
                             "DatasetsIngestResponse")
    assert queued["status"] == "queued"
    return wait_for_import(platform, owner, slug, timeout=timeout)


def wait_for_import(platform: Any, owner: str, slug: str, *, timeout: float = 180) -> dict[str, Any]:
    """Poll until the dataset is no longer processing (each import runs in a worker process: seconds to start
    on a busy machine)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        dataset = platform.datasets.retrieve(owner, slug)["dataset"]
        if dataset.get("status") != "processing":
            return dataset
        time.sleep(0.1)
    raise AssertionError("ingest did not finish")


def package(root: Path, out: Path) -> Path:
    """Zip a local YOLO dataset the way the official `ul` CLI does."""
    out.mkdir(parents=True, exist_ok=True)
    return package_dataset(root / "data.yaml", str(out), None)


def queue_import(app: Any, account: Any, client: Any, sdk: Any, slug: str, archive: Path) -> str:
    """Upload ``archive`` and accept it for import without waking the queue; returns the job id."""
    platform = sdk(account)
    created = platform.datasets.create(dataset=slug, name=slug)
    signed = platform.upload.signed_url(body={"assetType": "datasets", "assetId": created["id"],
                                              "filename": archive.name, "totalBytes": archive.stat().st_size})
    assert client.put(signed["uploadUrl"], content=archive.read_bytes()).status_code == 200
    with app.state.lanner.db.session() as session:
        user = session.get(User, account.user_id)
        dataset = session.get(Dataset, created["id"])
        return import_jobs.start_import(session, Principal.of(user), dataset, session_id=signed["sessionId"]).id


def import_local(app: Any, tmp_path: Path, owner: str, slug: str, *, seed: int, visibility: str = "private",
                 classes: list[str] | None = None) -> None:
    """A small detection dataset (3 train, 2 val images of ``lanner.synthetic``) imported in-process as ``owner``
    would upload it; ``classes``: the dataset's class names before the import."""
    ctx = app.state.lanner
    root = tmp_path / f"{owner}-{slug}"
    make_detection_dataset(root, train=3, val=2, size=48, seed=seed)
    with prepare_import(blobs=ctx.blobs, settings=ctx.settings, source=root) as prepared, \
            ctx.db.session() as session:
        principal = Principal.of(accounts_service.require_user(session, username=owner))
        dataset = datasets_service.create_dataset(session, principal, name=slug, task="detect",
                                                  visibility=visibility)
        if classes is not None:
            dataset.class_names = classes
        commit_import(session, prepared, dataset=dataset, queued=False)


def list_images(client: Any, who: Any, address: str) -> list[dict[str, Any]]:
    answer = client.get(f"/api/datasets/{address}/images", params={"includeLabels": True, "limit": 100},
                        headers=who.headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["images"] if "images" in answer.json() else answer.json()["items"]
