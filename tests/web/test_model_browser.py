"""The project and model pages in a real browser against a real server: a model page follows its run live (a
new epoch_end and console_output webhook sent with the user's key show up without a reload), the run is
cancelled from the page, and two runs are compared from the project's table."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.web.conftest import User, WebServer, screenshot, signed_in

pytestmark = pytest.mark.browser

METRICS = {"train/box_loss": 1.5, "train/cls_loss": 0.8, "val/box_loss": 1.7, "metrics/mAP50(B)": 0.3,
           "metrics/mAP50-95(B)": 0.2, "metrics/precision(B)": 0.5, "metrics/recall(B)": 0.4}


def webhook(web_server: WebServer, user: User, event: str, data: dict[str, Any], **fields: Any) -> dict[str, Any]:
    response = web_server.api(user, "POST", "/api/webhooks/training/metrics",
                              json={"event": event, "data": data, **fields})
    assert response.status_code == 200, response.text
    return response.json()


def a_run(web_server: WebServer, user: User, name: str, epochs: int, gain: float = 0.0, **args: Any) -> str:
    started = webhook(web_server, user, "training_started", {
        "epochs": epochs, "trainArgs": {"model": "yolo11n.yaml", "epochs": str(epochs), **args}},
        project=f"{user.username}/shapes", name=name)
    for epoch in range(2):
        webhook(web_server, user, "epoch_end", {"epoch": epoch, "metrics": {
            **METRICS, "metrics/mAP50-95(B)": (0.2, 0.3)[epoch] + gain, "train/box_loss": 1.5 - gain - 0.2 * epoch},
            "system": {"cpu": 35.0, "ram": 12.5}},
            modelId=started["modelId"])
    webhook(web_server, user, "console_output", {"chunkId": 1, "content": "Epoch 2/5 box_loss 1.5\n",
                                                  "lineCount": 1}, modelId=started["modelId"])
    return started["modelId"]


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
    signed_in(page, bob, "/bob/shapes")
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
