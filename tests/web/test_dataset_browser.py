"""The dataset pages in a real browser against a real server: a zip dropped on the upload area goes up with a
progress bar, is imported and reported; the grid shows its thumbnails with their boxes, filters by class and by
a health issue (htmx swaps the grid), a version is saved and compared with the current content, and the dataset
is cloned, deleted and restored from the trash. Fails on any request to another host or any browser error (see
``conftest.page``)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.datasets.trash import TRASH_DAYS
from lanner.synthetic import make_detection_dataset
from tests.web.conftest import WebServer, screenshot, signed_in

pytestmark = pytest.mark.browser
IMAGES = 8 + 4 + 1  # train, val, and a copy of a train image in val (a duplicate)


def synthetic_zip(folder: Path) -> Path:
    root = folder / "shapes"
    make_detection_dataset(root, train=8, val=4, size=96, seed=5)
    shutil.copy(root / "images" / "train" / "train_0000.jpg", root / "images" / "val" / "copy.jpg")
    shutil.copy(root / "labels" / "train" / "train_0000.txt", root / "labels" / "val" / "copy.txt")
    return Path(shutil.make_archive(str(folder / "shapes"), "zip", root))


def grid_count(page: Any) -> int:
    return int(page.locator("#grid-count").inner_text().split()[0])


def test_upload_filter_version_and_clone_a_dataset(page: Any, web_server: WebServer, tmp_path: Path) -> None:
    alice = web_server.user("alice")
    archive = synthetic_zip(tmp_path)
    signed_in(page, alice, "/datasets")
    page.locator("#field-name").fill("Shapes")
    page.locator("#ds-file").set_input_files(str(archive))
    report = page.locator("#import-report")
    report.wait_for(timeout=120_000)
    expect(page.locator("#ds-upload-step")).to_have_text(f"Imported {IMAGES} images.")
    assert page.locator("#ds-progress").get_attribute("value") == "100" or \
        page.locator("#ds-progress").evaluate("p => p.value") == 100
    assert report.locator("[data-report=added]").inner_text() == str(IMAGES)
    expect(page.locator("#dataset-list li")).to_have_count(1)  # the list shows the new dataset
    screenshot(page, "datasets-upload")

    report.get_by_role("link", name="Open the dataset").click()
    page.wait_for_url("**/datasets/alice/shapes")
    thumbs = page.locator("#ds-grid .ds-grid > li")
    expect(thumbs).to_have_count(IMAGES)
    assert page.locator("#ds-grid svg rect.ds-box").count() >= IMAGES - 1
    page.locator("#class-chart .uplot").wait_for()  # the class chart drew
    thumbs.first.locator("a").click()
    expect(page.locator("#ds-image image")).to_have_count(1)
    assert page.locator("#ds-image rect.ds-box").count() == page.locator("#label-list tbody tr").count()
    screenshot(page, "dataset-image")
    page.go_back()

    page.locator("#f-class").select_option("0")  # htmx: the grid only
    page.wait_for_url(re.compile(r"class=0"))
    expect(page.locator("#grid-count")).to_contain_text("match")
    circles = grid_count(page)
    assert 0 < circles < IMAGES
    expect(thumbs).to_have_count(circles)
    for i in range(circles):
        assert thumbs.nth(i).locator("rect.ds-c0").count() > 0

    page.locator("#f-class").select_option("")
    page.locator("#f-issue").select_option("duplicate")
    page.wait_for_url(re.compile(r"issue=duplicate"))
    expect(thumbs).to_have_count(2)
    screenshot(page, "dataset")

    page.locator("#health-findings a[data-issue=leakage]").click()
    page.wait_for_url(re.compile(r"issue=leakage"))
    expect(thumbs).to_have_count(2)

    page.locator("#version-description").fill("as uploaded")
    page.get_by_role("button", name="Save a version").click()
    expect(page.locator("#messages")).to_contain_text("Version 1 saved.")
    expect(page.locator("#version-list tbody tr")).to_have_count(1)
    expect(page.locator("#version-list tbody tr")).to_contain_text("as uploaded")
    page.locator("#compare-form").get_by_role("button", name="Compare").click()  # v1 with the current content
    page.wait_for_url(re.compile(r"/datasets/alice/shapes/compare\?base=1&head=0$"))
    images = page.locator("#compare-splits tbody tr", has_text="images").first.locator("td")
    expect(images).to_have_text([str(IMAGES), str(IMAGES), "+0"])
    expect(page.locator("#change-summary")).to_contain_text("0 added · 0 removed")
    expect(page.locator("#compare-classes tbody tr")).to_have_count(2)  # circle and square
    screenshot(page, "dataset-versions")
    page.get_by_role("link", name="Back to the dataset").click()

    page.locator("#clone-name").fill("shapes copy")
    page.get_by_role("button", name="Clone").click()
    page.wait_for_url("**/datasets/alice/shapes-copy")
    assert "Cloned alice/shapes" in page.locator("#messages").inner_text()
    expect(page.locator("#ds-grid .ds-grid > li")).to_have_count(IMAGES)

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()  # htmx asks first, then follows the redirect
    page.wait_for_url("**/datasets/trash")
    row = page.locator("#trash-list tr", has_text="shapes copy")
    expect(row.locator("td").nth(2)).to_have_text(str(TRASH_DAYS))  # days left to restore it
    screenshot(page, "dataset-trash")
    row.get_by_role("button", name=re.compile("Restore")).click()
    page.get_by_text("Dataset restored.").wait_for()
    page.goto("/datasets")
    expect(page.locator("#dataset-list li")).to_have_count(2)
    screenshot(page, "datasets")
