"""The assistant's section in a real browser against a real server: the owner turns the assistant on from the
dataset page (htmx swaps the section: it now waits for the labels still missing), and when rounds reach the
database the open page's poll brings in their state, table and quality chart (uPlot, from the page's static
script) without a reload. Fails on any browser error (see
``conftest.page``), a Content-Security-Policy violation among them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.synthetic import make_detection_dataset
from tests.web.conftest import WebServer, screenshot, signed_in
from tests.web.test_assistant_pages import add_rounds

pytestmark = pytest.mark.browser
TRAIN, VAL = 4, 2  # every image labelled but one


def test_turning_the_assistant_on_and_its_quality_chart(page: Any, web_server: WebServer, tmp_path: Path) -> None:
    alice = web_server.user("alice")
    data = make_detection_dataset(tmp_path / "boxes", train=TRAIN, val=VAL, size=64, seed=3)
    (data.parent / "labels" / "train" / "train_0000.txt").unlink()  # round 1 waits for this one, the 6th
    web_server.cli("datasets", "import", str(data.parent), "--owner", "alice", "--name", "boxes")
    signed_in(page, alice, "/datasets/alice/boxes")
    section = page.locator("#assistant")
    expect(section.locator("#assistant-status")).to_contain_text("The assistant is off.")

    section.get_by_role("switch", name="Assistant on: train while I label").check()
    section.get_by_label("Epochs").fill("5")
    section.get_by_role("button", name="Save").click()
    # Round 1 needs 20 labelled images, or every image of a smaller dataset: here all 6.
    expect(section.locator("#assistant-status")).to_contain_text("Waiting for 1 more labelled image before round 1.")
    expect(section.locator("#assistant-counts")).to_contain_text("5 of 6 images labelled")
    expect(section).to_contain_text("Assistant on: settings saved.")
    expect(section.locator("#assistant-chart-empty")).to_be_visible()
    saved = web_server.api(alice, "GET", "/api/datasets/alice/boxes/assistant").json()
    assert (saved["enabled"], saved["epochs"], saved["gpuType"]) == (True, 5, "cpu")

    add_rounds(web_server.db, slug="boxes")  # the open page's poll (every 15 s while waiting) brings them in
    expect(section.locator("#assistant-status")).to_contain_text("Round 3 failed", timeout=40_000)
    chart = page.locator("#assistant-chart")
    expect(chart.locator("canvas")).to_be_visible()
    expect(chart.locator(".u-legend")).to_contain_text("Accepted unchanged")
    expect(page.locator("#assistant-rounds tbody tr")).to_have_count(3)
    section.scroll_into_view_if_needed()
    screenshot(page, "dataset-assistant")
