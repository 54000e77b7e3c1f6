"""The dataset pages' smaller things in a real browser against a real server (issue 27): counts that call images
images, the grid's file-name search (no click), an image's previous/next links and arrow keys in the grid's order
and its zoom, and exports that download under the dataset's name. Fails on any browser error (see
``conftest.page``), a Content-Security-Policy violation among them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.synthetic import make_detection_dataset
from tests.web.conftest import WebServer, signed_in

pytestmark = pytest.mark.browser
TRAIN, VAL = 5, 3


@pytest.fixture(scope="module")
def boxes(web_server: WebServer, tmp_path_factory: pytest.TempPathFactory) -> WebServer:
    data = make_detection_dataset(tmp_path_factory.mktemp("boxes") / "boxes", train=TRAIN, val=VAL, size=64, seed=3)
    web_server.user("alice")
    web_server.cli("datasets", "import", str(data.parent), "--owner", "alice", "--name", "boxes")
    return web_server


def test_the_counts_call_images_images(page: Any, boxes: WebServer) -> None:
    alice = boxes.user("alice")
    signed_in(page, alice, "/datasets/alice/boxes")
    labels = boxes.api(alice, "GET", "/api/datasets/alice/boxes").json()["dataset"]["annotationCount"]
    expect(page.locator("#ds-counts")).to_have_text(re.compile(
        rf"^{TRAIN + VAL} images \({TRAIN} train,\s+{VAL} val, 0 test\) · \d+ class(es)? ·\s+{labels} labels?$"))


def test_the_grid_searches_file_names_as_one_types(page: Any, boxes: WebServer) -> None:
    signed_in(page, boxes.user("alice"), "/datasets/alice/boxes")
    page.locator("#f-name").press_sequentially("val_", delay=20)  # no button: the grid follows the typing
    page.wait_for_url(re.compile(r"q=val_"))
    thumbs = page.locator("#ds-grid .ds-grid > li")
    expect(thumbs).to_have_count(VAL)
    expect(page.locator("#grid-count")).to_have_text(f"{VAL} images match the filters")
    for i in range(VAL):
        assert thumbs.nth(i).locator(".caption").inner_text().startswith("val_")


def test_exports_download_under_the_datasets_name(page: Any, boxes: WebServer) -> None:
    signed_in(page, boxes.user("alice"), "/datasets/alice/boxes")
    today = datetime.now(UTC).date().isoformat()
    with page.expect_download() as download:
        page.locator("#export-links a", has_text="YOLO").click()
    assert download.value.suggested_filename == f"boxes-{today}.zip"  # was dataset.zip


def test_previous_next_arrow_keys_and_zoom_on_an_image(page: Any, boxes: WebServer) -> None:
    alice = boxes.user("alice")
    signed_in(page, alice, "/datasets/alice/boxes")
    names = page.locator("#ds-grid .caption").all_inner_texts()
    assert names == sorted(names) and len(names) == TRAIN + VAL
    page.locator("#ds-grid .ds-thumb").first.click()
    expect(page.locator("h1")).to_have_text(names[0])
    expect(page.locator("#image-prev")).to_have_count(0)  # the first image has no previous one

    page.wait_for_load_state()  # its script listens for the keys once loaded
    page.keyboard.press("ArrowRight")
    expect(page.locator("h1")).to_have_text(names[1])
    page.locator("#image-next").click()
    expect(page.locator("h1")).to_have_text(names[2])
    page.wait_for_load_state()
    page.keyboard.press("ArrowLeft")
    expect(page.locator("h1")).to_have_text(names[1])
    page.locator("#image-prev").click()
    expect(page.locator("h1")).to_have_text(names[0])
    page.wait_for_load_state()

    figure, image, picture = page.locator("#ds-figure"), page.locator("#ds-image"), page.locator("#ds-image image")
    width = picture.bounding_box()["width"]  # as drawn
    image.click()
    expect(figure).to_have_class(re.compile(r"\bds-zoomed\b"))
    expect(page.locator("#ds-zoom")).to_have_attribute("aria-pressed", "true")
    assert picture.bounding_box()["width"] > 1.5 * width
    page.locator("#ds-zoom").click()
    expect(figure).not_to_have_class(re.compile(r"\bds-zoomed\b"))

    page.get_by_role("link", name="Back to the images").click()
    thumbs = page.locator("#ds-grid .ds-thumb")
    expect(thumbs).to_have_count(TRAIN + VAL)  # `last` of a page still being parsed is an earlier image
    thumbs.last.click()
    expect(page.locator("h1")).to_have_text(names[-1])
    expect(page.locator("#image-next")).to_have_count(0)  # nor the last a next one


def test_bulk_select_moves_and_deletes_images(page: Any, boxes: WebServer, tmp_path_factory: Any) -> None:
    data = make_detection_dataset(tmp_path_factory.mktemp("bulk") / "bulk", train=TRAIN, val=VAL, size=64, seed=4)
    boxes.cli("datasets", "import", str(data.parent), "--owner", "alice", "--name", "bulk")
    signed_in(page, boxes.user("alice"), "/datasets/alice/bulk")
    count = page.locator("#ds-bulk-count")
    expect(count).to_have_text("None selected")
    expect(page.locator("#ds-bulk-move")).to_be_disabled()
    page.get_by_label("Select val_0000.jpg").check()
    page.get_by_label("Select val_0001.jpg").check()
    expect(count).to_have_text("2 selected")
    page.locator("#ds-bulk-split").select_option("test")
    page.locator("#ds-bulk-move").click()
    expect(page.locator("#ds-counts")).to_contain_text(f"({TRAIN} train, {VAL - 2} val, 2 test)")
    page.wait_for_load_state("load")  # the page reloaded: its script counts the selection once it has run

    page.get_by_label("Select train_0000.jpg").check()
    expect(count).to_have_text("1 selected")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#ds-bulk-delete").click()
    expect(page.locator("#ds-counts")).to_contain_text(f"{TRAIN + VAL - 1} images ({TRAIN - 1} train")
    expect(page.get_by_label("Select train_0000.jpg")).to_have_count(0)
