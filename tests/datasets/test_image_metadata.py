"""``images.update {metadata}``: an image's custom fields replaced, read back by ``images.retrieve`` (the SDK's
shapes), kept by a clone and a version as they were while the dataset changes; bad bodies are 400 with the reason
and change nothing; only those who may change the dataset may set them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem, DatasetVersion
from tests.datasets.helpers import import_local, list_images
from tests.sdk_types import assert_sdk_type


def test_custom_fields_of_an_image(app: Any, client: Any, make_account: Any, tmp_path: Path) -> None:
    alice, bob = make_account("alice"), make_account("bob")
    import_local(app, tmp_path, "alice", "parts", seed=1, visibility="public")
    image_id = list_images(client, alice, "alice/parts")[0]["id"]
    fields = {"location": "strasbourg", "camera": {"id": 3, "lens": "wide"}, "night": False}
    with app.state.lanner.db.session() as session:  # a version before any metadata
        dataset = session.query(Dataset).filter_by(slug="parts").one()
        datasets_service.create_version(session, dataset, description="before")

    updated = client.patch(f"/api/images/{image_id}", json={"metadata": fields}, headers=alice.headers)
    assert updated.status_code == 200, updated.text
    assert_sdk_type(updated.json(), "ImagesUpdateResponse")
    assert updated.json()["metadata"] == fields and updated.json()["updatedAt"]
    read = client.get(f"/api/images/{image_id}", headers=bob.headers).json()  # a public dataset: bob reads it
    assert read["metadata"] == fields
    clone = client.post("/api/datasets/alice/parts/clone", json={"name": "copy"}, headers=alice.headers).json()
    clone_image = f"{clone['id']}-{image_id.rsplit('-', 1)[1]}"
    assert client.get(f"/api/images/{clone_image}", headers=alice.headers).json()["metadata"] == fields

    for body, reason in (({"metadata": ["a"]}, "JSON object"), ({"metadata": {str(i): i for i in range(101)}}, "keys"),
                         ({"metadata": {"big": "x" * 20_000}}, "bytes"), ({}, "one of the two"),
                         ({"metadata": {}, "labels": []}, "one of the two")):
        refused = client.patch(f"/api/images/{image_id}", json=body, headers=alice.headers)
        assert refused.status_code == 400 and reason in refused.json()["error"], refused.text
    assert client.patch(f"/api/images/{image_id}", json={"metadata": {"x": 1}},
                        headers=bob.headers).status_code == 403  # public, read-only for him
    assert client.get(f"/api/images/{image_id}", headers=alice.headers).json()["metadata"] == fields

    cleared = client.patch(f"/api/images/{image_id}", json={"metadata": {}}, headers=alice.headers)
    assert cleared.json()["metadata"] == {}
    assert client.get(f"/api/images/{clone_image}", headers=alice.headers).json()["metadata"] == fields
    labels = client.patch(f"/api/images/{image_id}", json={"labels": []}, headers=alice.headers).json()
    assert labels == {"success": True, "labels": [], "labelCount": 0}
    with app.state.lanner.db.session() as session:  # the version froze the image without fields
        version = session.query(DatasetVersion).one()
        frozen = session.query(DatasetItem).filter_by(manifest_id=version.manifest_id,
                                                      key=image_id.rsplit("-", 1)[1]).one()
        assert frozen.metadata_ is None
