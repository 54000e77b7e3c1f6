"""The train dialog in a real browser against a real server: a dataset imported with ``lanner datasets import``,
every GPU type with time and cost, a tier-locked type refused next to the GPU field, and a quick CPU run started
(the server's local executor launches it) that ends on the model's URL, trains, and leaves its charge on the
account page. Marked e2e: the run really trains."""

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


def test_train_dialog_estimates_refuses_a_locked_gpu_and_starts_a_quick_cpu_run(page: Any, web_server: WebServer,
                                                                              tmp_path: Path) -> None:
    alice = web_server.user("alice", credits=20)
    root = make_detection_dataset(tmp_path / "shapes", train=8, val=4, size=64).parent
    web_server.cli("datasets", "import", str(root), "--owner", "alice", "--name", "shapes")
    signed_in(page, alice, "/train")
    page.get_by_label("Dataset", exact=True).select_option("ul://alice/datasets/shapes")
    page.get_by_label("Epochs", exact=True).fill("1")
    page.get_by_label("Image size", exact=True).fill("64")
    page.get_by_label("Batch", exact=True).fill("4")
    page.get_by_label("Project", exact=True).fill("demo")
    page.get_by_label("Model name", exact=True).fill("quick")
    page.get_by_role("button", name="Update estimate").click()
    table = page.locator("#gpu-table")
    table.wait_for()
    offered = {gpu.id for gpu in get_catalogue(Settings(home=web_server.server.home)).offered()}
    for gpu in offered:
        row = page.locator(f'#gpu-table tr[data-gpu="{gpu}"]')
        expect(row).to_contain_text("$")
    screenshot(page, "train-dialog")
    page.locator('#gpu-table tr[data-gpu="h200-sxm"] input[type="radio"]').check()
    page.get_by_role("button", name="Start training").click()
    expect(page.locator("#field-gpu-error")).to_contain_text("needs the pro tier")
    page.locator("#field-quick").check()
    page.get_by_label("Fraction of images").fill("0.5")  # a fraction: the field must not demand whole numbers
    with page.expect_response(_estimate):  # htmx re-estimates on change (debounced): wait for the answer
        page.get_by_label("Quick-run epochs (at most 5)").fill("1")
        page.get_by_label("Quick-run epochs (at most 5)").blur()
    with page.expect_response(_estimate):
        page.locator('#gpu-table tr[data-gpu="cpu"] input[type="radio"]').check()
    expect(page.locator('#gpu-table tr[data-gpu="cpu"] input[type="radio"]')).to_be_checked()
    page.get_by_role("button", name="Start training").click()
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
