"""An unlabelled shapes dataset (the generator's labels kept aside as the ground truth), labelled through the
API as a person would; the assistants' loop and the supervisor are driven by hand."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lanner.config import Settings
from lanner.synthetic import make_detection_dataset
from tests.conftest import GENEROUS_LIMITS, TEST_URL
from tests.datasets.helpers import package, upload_dataset


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL,
                    secret_key="test-secret", api_key_cache_seconds=0, supervisor_interval_seconds=0,
                    assistant_poll_seconds=0, cancel_grace_seconds=0, meter_interval_seconds=0, **GENEROUS_LIMITS)


@dataclass
class Truth:
    """The generator's labels of each image, by file name (what a careful person would draw)."""

    labels: dict[str, list[dict[str, Any]]]


def unlabelled_shapes(root: Path, *, train: int, val: int, size: int, seed: int = 0) -> tuple[Path, Truth]:
    """A shapes dataset without its label files, and the labels it had."""
    data = make_detection_dataset(root, train=train, val=val, size=size, seed=seed)
    truth: dict[str, list[dict[str, Any]]] = {}
    for label_file in sorted((root / "labels").rglob("*.txt")):
        rows = [line.split() for line in label_file.read_text().splitlines() if line.strip()]
        truth[label_file.stem + ".jpg"] = [{"classId": int(r[0]), "bbox": [float(v) for v in r[1:5]]} for r in rows]
    shutil.rmtree(root / "labels")
    return data, Truth(truth)


def upload_unlabelled(platform: Any, http: Any, tmp_path: Path, *, owner: str = "alice", slug: str = "raw",
                      train: int = 24, val: int = 6, size: int = 64) -> Truth:
    data, truth = unlabelled_shapes(tmp_path / slug, train=train, val=val, size=size)
    archive = package(data.parent, tmp_path / f"{slug}-zip")
    dataset = upload_dataset(platform, http, owner, slug, archive)
    assert dataset["status"] == "ready", dataset
    return truth


def images(client: Any, headers: dict[str, str], owner: str, slug: str) -> dict[str, str]:
    """File name -> image id of every image of the dataset."""
    out, cursor = {}, None
    while True:
        params = {"limit": 200, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"/api/datasets/{owner}/{slug}/images", headers=headers, params=params).json()
        out.update({image["name"]: image["id"] for image in page["images"]})
        cursor = page.get("nextCursor")
        if not cursor:
            return out


def label(client: Any, headers: dict[str, str], image_id: str, labels: list[dict[str, Any]]) -> None:
    """Save an image's labels as a person's editor does (``images.update``)."""
    response = client.patch(f"/api/images/{image_id}", headers=headers, json={"labels": labels})
    assert response.status_code == 200, response.text
