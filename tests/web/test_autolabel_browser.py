"""Auto-annotation in a real browser against a real server with a real worker (the local executor): the owner
opens "Auto-annotate" on the dataset page, picks the tiny trained detector and a confidence, previews what it
labels on the unlabelled images (boxes drawn over each), applies, and follows the run to its end; the grid then
shows the model's labels on those images, and the images that had labels keep them exactly."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import func, select
from ultralytics_platform import Platform

from lanner import models_registry  # noqa: F401  (every table: the ledger's foreign keys name runs)
from lanner.datasets.models import DatasetVersion
from lanner.projects.models import ModelRecord
from lanner.synthetic import CLASSES, make_detection_dataset
from tests.datasets.helpers import upload_dataset
from tests.trained import IMGSZ, tiny_weights  # noqa: F401  (a fixture)
from tests.web.conftest import WebServer, screenshot, signed_in

pytestmark = pytest.mark.browser
UNLABELLED = 4


def _dataset_with_unlabelled_images(platform: Platform, folder: Path) -> None:
    root = folder / "shapes"
    make_detection_dataset(root, train=6, val=2, size=IMGSZ, seed=11)
    for label in sorted((root / "labels" / "train").glob("*.txt"))[:UNLABELLED]:
        label.unlink()
    archive = Path(shutil.make_archive(str(folder / "shapes"), "zip", root))
    with httpx.Client(timeout=60) as http:
        upload_dataset(platform, http, "alice", "shapes", archive)


def _model_with_weights(web_server: WebServer, platform: Platform, weights: Path) -> None:
    """The tiny detector uploaded as ``ul`` uploads a checkpoint, with the task and classes a finished run
    leaves on its model (an upload alone does not read them)."""
    platform.projects.create(owner="alice", project="shapes", name="shapes", visibility="private")
    model = platform.models.create(body={"project": "shapes", "model": "tiny", "name": "tiny"})
    slot = platform.upload.signed_url(body={"assetType": "models", "assetId": model["id"], "filename": "best.pt"})
    httpx.put(slot["uploadUrl"], content=weights.read_bytes(), timeout=60).raise_for_status()
    platform.upload.complete(session_id=slot["sessionId"])
    with web_server.db.session() as session:
        record = session.get(ModelRecord, model["id"])
        record.task, record.class_names, record.train_args = "detect", list(CLASSES), {"imgsz": IMGSZ}


def _labels(platform: Platform) -> dict[str, Any]:
    images = platform.datasets.images("alice", "shapes", limit=100, include_labels="true")["images"]
    return {image["id"]: image.get("labels") for image in images}


def test_preview_then_apply_auto_annotation(page: Any, web_server: WebServer, tmp_path: Path,
                                            tiny_weights: Path) -> None:  # noqa: F811
    alice = web_server.user("alice", credits=5)
    platform = Platform(base_url=web_server.url, api_key=alice.key, timeout=60)
    _dataset_with_unlabelled_images(platform, tmp_path)
    _model_with_weights(web_server, platform, tiny_weights)
    before = _labels(platform)
    assert sum(1 for labels in before.values() if not labels) == UNLABELLED

    signed_in(page, alice, "/datasets/alice/shapes")
    page.locator("#autolabel-open").click()
    dialog = page.locator("#autolabel-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("#al-model option")).to_have_count(1)
    dialog.get_by_label("Confidence threshold").fill("0.001")
    dialog.get_by_role("button", name="Preview").click()
    expect(dialog.locator("#al-status")).to_contain_text("Preview:", timeout=120_000)
    expect(dialog.locator("#al-preview > li")).to_have_count(UNLABELLED)
    assert dialog.locator("#al-preview rect.al-box").count() > 0
    expect(dialog.locator("#al-status")).to_contain_text("Nothing is changed until you apply")
    screenshot(page, "autolabel-preview")
    assert _labels(platform) == before  # a preview changes nothing

    dialog.get_by_role("button", name="Apply to all images").click()
    expect(dialog.locator("#al-status")).to_contain_text("Done:", timeout=240_000)
    screenshot(page, "autolabel-done")

    after = _labels(platform)
    for image_id, labels in before.items():
        if labels:
            assert after[image_id] == labels  # existing labels untouched
        else:
            assert after[image_id], f"{image_id} got no labels"
    with web_server.db.session() as session:  # saved before the run
        assert session.scalar(select(func.count()).select_from(DatasetVersion)) == 1
    dialog.get_by_role("button", name="Close").click()
    page.wait_for_load_state()
    expect(page.locator("#ds-grid svg rect.ds-box").first).to_be_visible()
