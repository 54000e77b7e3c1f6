"""The train dialog in a real browser against a real server without a GPU: a dataset imported with ``lanner
datasets import``, the dialog opened from the home page's Train button (prefilled), the CPU offered and
pre-selected with every other type under a collapsed "not available here", Start in view, and a quick CPU run
started (the server's local executor launches it) that ends on the model's URL, trains, and leaves its charge
on the account page. Marked e2e: the run really trains."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.config import Settings
from lanner.gpus.catalogue import get_catalogue
from lanner.synthetic import make_detection_dataset
from tests.web.conftest import WebServer, screenshot, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def _estimate(response: Any) -> bool:
    """An htmx re-estimate of the train form (the launch is a plain form post, without the HX-Request header)."""
    return response.url.endswith("/train") and response.request.headers.get("hx-request") == "true"


def test_train_from_home_offers_what_runs_here_keeps_start_in_view_and_starts_a_quick_cpu_run(
        page: Any, web_server: WebServer, tmp_path: Path) -> None:
    alice = web_server.user("alice", credits=20)
    root = make_detection_dataset(tmp_path / "shapes", train=8, val=4, size=64).parent
    web_server.cli("datasets", "import", str(root), "--owner", "alice", "--name", "shapes")
    signed_in(page, alice, "/")
    page.get_by_role("link", name="Train", exact=True).click()  # from the home page: no typed URL
    expect(page).to_have_url(re.compile(r"/train$"))
    # Prefilled: the newest ready dataset, a project named after it, a model name.
    expect(page.get_by_label("Dataset", exact=True)).to_have_value("ul://alice/datasets/shapes")
    expect(page.get_by_label("Project", exact=True)).to_have_value("shapes")
    expect(page.get_by_label("Model name", exact=True)).to_have_value("yolo11n")
    # This server has no GPU: the CPU is the row offered, pre-selected and recommended; every other type is
    # under a collapsed "not available here", without a radio.
    table = page.locator("#gpu-table")
    expect(table.locator("tbody tr")).to_have_count(1)
    cpu = page.locator('#gpu-table tr[data-gpu="cpu"] input[type="radio"]')
    expect(cpu).to_be_checked()
    expect(page.locator("#picks")).to_contain_text("CPU")
    elsewhere = page.locator("#gpu-elsewhere")
    expect(elsewhere).not_to_have_attribute("open", re.compile(".*"))
    offered = {gpu.id for gpu in get_catalogue(Settings(home=web_server.server.home)).offered()}
    expect(elsewhere.locator("tbody tr")).to_have_count(len(offered) - 1)
    expect(elsewhere.locator('tr[data-gpu="h200-sxm"]')).to_be_hidden()
    expect(elsewhere.locator("input[type=radio]")).to_have_count(0)
    # Start and the summary (chosen GPU, time, cost) are in view without scrolling.
    start = page.get_by_role("button", name="Start training")
    expect(start).to_be_in_viewport()
    expect(page.locator("#chosen-gpu")).to_have_text("CPU (host)")
    expect(page.locator("#chosen-gpu")).to_be_in_viewport()
    expect(page.locator("#chosen-time")).to_have_text(re.compile(r"^[<\d.]+ (s|min|h)$"))
    expect(page.locator("#chart-legend")).to_contain_text("Runs here CPU (host)")
    screenshot(page, "train-dialog")
    elsewhere.locator("summary").click()  # opened, the others are there for comparison
    for gpu in offered - {"cpu"}:
        expect(elsewhere.locator(f'tr[data-gpu="{gpu}"]')).to_contain_text("$")
    elsewhere.locator("summary").click()
    expect(page.get_by_label("Image size", exact=True)).to_have_value("64")  # the dataset's images are 64 px
    for label, value in (("Epochs", "1"), ("Batch", "4"), ("Project", "demo"), ("Model name", "quick")):
        with page.expect_response(_estimate):  # htmx re-estimates on change (debounced): wait for the answer
            page.get_by_label(label, exact=True).fill(value)
            page.get_by_label(label, exact=True).blur()
        expect(cpu).to_be_checked()  # the selection stays with the advice
    page.locator("#field-quick").check()
    page.get_by_label("Fraction of images").fill("0.5")  # a fraction: the field must not demand whole numbers
    with page.expect_response(_estimate):  # htmx re-estimates on change (debounced): wait for the answer
        page.get_by_label("Quick-run epochs (at most 5)").fill("1")
        page.get_by_label("Quick-run epochs (at most 5)").blur()
    expect(cpu).to_be_checked()
    expect(start).to_be_in_viewport()
    start.click()
    expect(page).to_have_url(re.compile(r"/alice/demo/quick$"), timeout=60_000)
    # The quick run ends (the local executor really trains it); its charge is on the account page.
    expect(page.locator("#model-status")).to_have_text(re.compile("completed|failed"), timeout=240_000)
    expect(page.locator("#model-status")).to_have_text("completed")
    offer = page.locator("#full-run")
    for _ in range(120):  # the corrected full-run estimate is written when the run is settled, just after
        if offer.count():
            break
        page.wait_for_timeout(500)
        page.reload()
    expect(offer).to_contain_text("scaled by")
    screenshot(page, "model-quick-run")
    offer.get_by_role("link", name="Launch the full run…").click()
    expect(page.locator('#gpu-table tr[data-gpu="cpu"] input[type="radio"]')).to_be_checked()
    expect(page.get_by_label("Model name", exact=True)).to_have_value("quick-full")
    expect(page.get_by_label("Dataset", exact=True)).to_have_value("ul://alice/datasets/shapes")
    page.goto(f"{web_server.url}/account")
    charge = page.locator("#transactions tbody tr", has=page.locator(".badge-charge"))
    expect(charge.first).to_contain_text("demo/quick")
    expect(charge.first).to_contain_text("cpu")
    expect(charge.first.locator("td.negative")).to_contain_text("$")  # money left the account
