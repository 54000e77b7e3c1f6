"""Bucket imports on both databases (the pins are written with each dialect's upsert): a small bucket imported
into two datasets pins each object once, both serve it, and disconnecting the bucket leaves the datasets visible
with their pixels reported unavailable, not served."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from lanner.integrations.models import BucketImport, BucketObject
from lanner.synthetic import make_detection_dataset
from tests.conftest import _db_counter, copy_of
from tests.integrations.conftest import Bucket


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return copy_of(request.getfixturevalue("sqlite_template"), tmp_path)
    cluster = request.getfixturevalue("postgres")
    name = f"lanner_test_{next(_db_counter)}"
    cluster.execute(f"CREATE DATABASE {name} TEMPLATE lanner_template")
    return cluster.url(name)


def test_two_imports_pin_each_object_once_and_a_disconnected_bucket_is_reported(
        client: Any, alice: Any, bucket: Bucket, app: Any, tmp_path: Path) -> None:
    folder = tmp_path / "shapes"
    make_detection_dataset(folder, train=2, val=1, size=64)
    for path in folder.rglob("*"):
        if path.is_file():
            bucket.s3.put_object(Bucket="photos", Key=path.relative_to(folder).as_posix(), Body=path.read_bytes())
    integration = client.post("/api/integrations/buckets", headers=alice.headers, json={
        "provider": "s3", "targets": ["photos"], "credentials": bucket.credentials()}).json()
    for slug in ("first", "second"):
        assert client.post("/api/datasets", headers=alice.headers, json={"name": slug}).status_code == 201
        job = client.post(f"/api/datasets/alice/{slug}/bucket-imports", headers=alice.headers,
                          json={"integrationId": integration["id"], "target": "photos"})
        assert job.status_code == 202
        app.state.bucket_imports.run_once()
        answer = client.get(f"/api/datasets/alice/{slug}/bucket-imports/{job.json()['id']}",
                            headers=alice.headers).json()
        assert answer["status"] == "succeeded" and answer["result"]["added"] == 3, answer
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(BucketObject)) == 3
        assert session.scalar(select(func.count()).select_from(BucketImport)) == 2
    images = [client.get(f"/api/datasets/alice/{slug}/images", headers=alice.headers).json()["images"][0]
              for slug in ("first", "second")]
    for image in images:
        served = client.get(f"/api/images/{image['id']}/source", headers=alice.headers, follow_redirects=False)
        assert served.status_code == 307

    assert client.delete(f"/api/integrations/buckets/{integration['id']}", headers=alice.headers).status_code == 200
    page = client.get("/api/datasets/alice/first/images", headers=alice.headers).json()
    assert page["total"] == 3  # still visible
    gone = client.get(f"/api/images/{images[0]['id']}/source", headers=alice.headers, follow_redirects=False)
    assert gone.status_code == 409 and "disconnected" in gone.json()["error"]
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(BucketObject)
                              .where(BucketObject.integration_id.is_(None))) == 3
