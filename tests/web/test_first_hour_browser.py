"""The first hour, walked as a newcomer walks it (issue 27): ``lanner demo`` then ``lanner serve`` on a fresh home,
and from the home page by clicks only (no typed URL after signing in): the demo dataset -> Train -> the dialog
starts from the demo's own starting model (trained by the server itself through the normal queue, on synthetic
images: nothing downloaded) and offers the CPU -> the run completes on the CPU -> the model page shows its curves
-> Export ONNX and download it -> Preview an image with the model's boxes drawn.

Everything is real: the demo's starting model and the fine-tune are trainer runs on this machine's CPU, the export
is the export worker's, the preview is shared inference. Slow (minutes: two real trainings), marked e2e."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.synthetic import make_detection_dataset
from tests.servers import lanner_cli, start_server, wait_for
from tests.web.conftest import User, WebServer, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
STARTER = "/api/models/demo/starter/shapes-base"


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """A fresh home made by `lanner demo` (as `make run` does), then its server."""
    home = tmp_path_factory.mktemp("first-hour")
    printed = lanner_cli(home, "demo")
    assert "starting model: ul://demo/starter/shapes-base" in printed, printed
    login = dict(re.findall(r"^\s+(password|API key):\s+(\S+)$", printed, flags=re.M))
    web = WebServer(start_server(home))
    web.users["demo"] = User(username="demo", key=login["API key"], password=login["password"])
    yield web
    web.stop()


def _starter_done(web_server: WebServer) -> dict[str, Any] | None:
    model = web_server.api(web_server.users["demo"], "GET", STARTER).json()["model"]
    assert model["status"] not in ("failed", "cancelled"), model
    return model if model["status"] == "completed" and model["hasWeights"] else None


def test_a_newcomers_first_model_from_the_home_page(page: Any, web_server: WebServer, tmp_path: Path) -> None:
    demo = web_server.users["demo"]
    page.goto("/")  # signed out: the sign-in page, then back home
    page.get_by_label("Username").fill(demo.username)
    page.get_by_label("Password").fill(demo.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{web_server.url}/")
    expect(page.get_by_role("link", name="shapes", exact=True)).to_be_visible()
    expect(page.get_by_text("shapes-pretraining")).to_have_count(0)  # the starter's data is not the user's list

    # The server trains the demo's starting model right after it starts (a real run on the CPU); a newcomer who
    # opens the dialog meanwhile is told it is on its way. Wait for it as a person would wait.
    wait_for(lambda: _starter_done(web_server), timeout=1500, what="the demo's starting model", every=5)

    page.get_by_role("link", name="shapes", exact=True).click()
    page.wait_for_url(re.compile(r"/datasets/demo/shapes$"))
    page.locator("#train-link").click()
    expect(page).to_have_url(re.compile(r"/train\?"))
    expect(page.get_by_label("Dataset", exact=True)).to_have_value("ul://demo/datasets/shapes")
    model = page.get_by_label("Model", exact=True)
    expect(model).to_have_value("ul://demo/starter/shapes-base")  # pretrained, not random weights
    expect(page.locator("#field-model-hint")).to_contain_text("Pretrained by `lanner demo`")
    expect(page.locator("#scratch-warning")).to_have_count(0)
    expect(page.get_by_label("Image size", exact=True)).to_have_value("160")  # the demo's images are 160 px
    cpu = page.locator('#gpu-table tr[data-gpu="cpu"] input[type="radio"]')
    expect(cpu).to_be_checked()
    for label, value in (("Epochs", "20"), ("Batch", "8")):
        with page.expect_response(lambda r: r.url.endswith("/train") and r.request.headers.get("hx-request")):
            page.get_by_label(label, exact=True).fill(value)
            page.get_by_label(label, exact=True).blur()
    expect(cpu).to_be_checked()
    expect(page.locator(".train-summary")).to_contain_text("earned from 1 finished run")  # the starter's run
    screenshot(page, "first-hour-train")
    page.get_by_role("button", name="Start training").click()
    page.wait_for_url(re.compile(r"/demo/shapes/shapes-base$"), timeout=60_000)

    expect(page.locator("#model-status")).to_have_text("completed", timeout=900_000)
    page.reload()  # the page says to reload for the weights, Preview and Export once the run ends
    expect(page.locator("#chart-loss canvas")).to_be_visible()
    expect(page.locator("#chart-metrics canvas")).to_be_visible()
    screenshot(page, "first-hour-model")

    page.get_by_role("button", name="Export ONNX").click()
    row = page.locator('#exports tr[data-format="onnx"]')
    expect(row).to_have_attribute("data-status", "completed", timeout=300_000)
    with page.expect_download() as info:
        row.get_by_role("link", name=re.compile(r"^Download .*\.onnx$")).click()
    exported = tmp_path / "model.onnx"
    info.value.save_as(exported)
    import onnx

    onnx.checker.check_model(onnx.load(str(exported)))

    image = next((make_detection_dataset(tmp_path / "demo", train=24, val=8, seed=7).parent
                  / "images" / "val").glob("*.jpg"))  # the demo's own validation images, drawn again
    expect(page.locator("#preview-imgsz")).to_have_value("160")
    page.set_input_files("#preview-file", str(image))
    canvas = page.locator("#preview-canvas")
    expect(canvas).to_have_attribute("data-boxes", re.compile(r"^[1-9]\d*$"), timeout=120_000)
    expect(page.locator("#preview-results tbody tr").first.locator("td").first).to_have_text(
        re.compile(r"(circle|square)$"))
    page.evaluate("document.getElementById('preview').scrollIntoView()")
    screenshot(page, "first-hour-preview")
