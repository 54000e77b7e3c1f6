"""The project and model pages in a real browser against a real server: a model page follows its run live (a
new epoch_end and console_output webhook sent with the user's key show up without a reload), the run is
cancelled from the page, and two runs are compared from the project's table (opened from the projects list)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.web.conftest import METRICS, WebServer, a_run, screenshot, signed_in, webhook

pytestmark = pytest.mark.browser


def test_a_model_page_follows_its_run_live_and_cancels_it(page: Any, web_server: WebServer) -> None:
    alice = web_server.user("alice")
    model_id = a_run(web_server, alice, "live", 5)
    signed_in(page, alice, "/alice/shapes/live")
    expect(page.locator("[data-live-field=epochs]")).to_have_text("2 / 5")
    expect(page.locator("#chart-metrics")).to_have_attribute("data-points", "2")
    expect(page.locator("#chart-metrics .u-legend")).to_be_visible()
    page.evaluate("window.loaded = true")  # gone after a reload

    webhook(web_server, alice, "epoch_end", {"epoch": 2, "metrics": {**METRICS, "metrics/mAP50-95(B)": 0.45}},
            modelId=model_id)
    webhook(web_server, alice, "console_output", {"chunkId": 2, "content": "Epoch 3/5 mAP rising\n",
                                                  "lineCount": 1}, modelId=model_id)
    expect(page.locator("[data-live-field=epochs]")).to_have_text("3 / 5", timeout=15_000)
    expect(page.locator("#console")).to_contain_text("Epoch 3/5 mAP rising", timeout=15_000)
    expect(page.locator("#chart-metrics")).to_have_attribute("data-points", "3")  # the new point, drawn
    assert page.evaluate("window.loaded") is True
    assert page.locator("#console [data-chunk]").count() == 2
    screenshot(page, "model-live")

    page.get_by_role("button", name="Cancel training").click()
    page.wait_for_url("**/alice/shapes/live")
    expect(page.locator("#messages")).to_contain_text("Training cancelled")
    expect(page.locator("#model-status")).to_have_text("cancelled")
    expect(page.get_by_role("button", name="Cancel training")).to_have_count(0)
    assert webhook(web_server, alice, "epoch_end", {"epoch": 3, "metrics": METRICS}, modelId=model_id)["cancelled"]


def test_two_runs_compared_from_the_project_table(page: Any, web_server: WebServer) -> None:
    bob = web_server.user("bob")
    a_run(web_server, bob, "small", 5)
    a_run(web_server, bob, "large", 5, gain=0.1, imgsz="1280")
    signed_in(page, bob, "/projects")
    row = page.locator("#project-list tbody tr", has_text="shapes")
    expect(row.locator("td").nth(2)).to_have_text("2")  # its two models
    screenshot(page, "projects")
    row.get_by_role("link", name="shapes").click()
    page.wait_for_url("**/bob/shapes")
    expect(page.locator("#run-list tbody tr")).to_have_count(2)
    screenshot(page, "project-runs")
    page.get_by_label("Select small").check()
    page.get_by_label("Select large").check()
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url("**/bob/shapes/-/compare?pick=*")
    assert sorted(parse_qs(urlsplit(page.url).query)["pick"]) == ["large", "small"]
    expect(page.locator("#compare-map .u-legend")).to_contain_text("small")
    expect(page.locator("#compare-map .u-legend")).to_contain_text("large")
    expect(page.locator("#arg-diff tr.differs")).to_have_count(1)
    expect(page.locator("#arg-diff tr.differs th")).to_contain_text("imgsz")
    screenshot(page, "compare-runs")
