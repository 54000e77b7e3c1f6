"""A small shapes dataset uploaded through the official SDK (as ``ul`` does), and helpers for the annotate API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset


@dataclass
class Shapes:
    platform: Any
    client: TestClient
    headers: dict[str, str]
    owner: str = "alice"
    slug: str = "shapes"

    def url(self, path: str = "", slug: str | None = None) -> str:
        return f"/api/datasets/{self.owner}/{slug or self.slug}{path}"

    def keys(self, slug: str | None = None) -> list[str]:
        """Image keys in the grid's order (name, then key)."""
        images = self.platform.datasets.images(self.owner, slug or self.slug, limit=100)["images"]
        return [i["id"].rpartition("-")[2] for i in images]

    def name_classes(self, names: list[str], slug: str | None = None) -> None:
        response = self.client.patch(self.url("", slug), json={"classNames": names}, headers=self.headers)
        assert response.status_code == 200, response.text

    def open(self, key: str, slug: str | None = None, **params: Any) -> dict[str, Any]:
        response = self.client.get(self.url(f"/annotate/{key}", slug), params=params, headers=self.headers)
        assert response.status_code == 200, response.text
        return response.json()

    def save(self, key: str, labels: list[dict], revision: int, edit_id: str, slug: str | None = None,
             **extra: Any) -> Any:
        return self.client.put(self.url(f"/annotate/{key}", slug), headers=self.headers,
                               json={"labels": labels, "revision": revision, "editId": edit_id, **extra})


@pytest.fixture
def shapes(sdk, alice, client, tmp_path) -> Shapes:
    root = tmp_path / "shapes"
    make_detection_dataset(root, train=6, val=3, size=64)
    platform = sdk(alice)
    upload_dataset(platform, client, "alice", "shapes", package(root, tmp_path / "zip"))
    return Shapes(platform, client, alice.headers)


from tests.inference.conftest import attach, shapes_detector  # noqa: E402, F401  (a fixture, for the proposal tests)
