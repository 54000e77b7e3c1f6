"""The collect template from a deployment's page, in a real browser against a real server with a real endpoint:
the model page's endpoint row links to "Collect uncertain images"; the form is enabled with a dataset, a band,
a rate of 100 % and a cap; a prediction the endpoint is unsure of lands in the dataset; the page then counts
"1 / 3" today, the row says so too, and "Label next" opens the editor on the captured image. Another person's
dataset cannot be chosen (the workspace's only), and a name typed into the form for one is refused."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.deployments.conftest import IMGSZ, image_file
from tests.deployments.test_e2e_local import alive, server_context
from tests.inference.conftest import shapes_detector  # noqa: F401  (a fixture)
from tests.servers import wait_for
from tests.trained import attach_weights
from tests.web.conftest import WebServer, screenshot, signed_in
from tests.web.test_deploy_browser import endpoint_pid

pytestmark = pytest.mark.browser
PAGE = "/alice/shapes/tiny/deployments/tiny-collect/collect"


def test_enable_collecting_then_a_prediction_is_in_the_label_queue(page: Any, web_server: WebServer,
                                                                   shapes_detector: Path,  # noqa: F811
                                                                   tmp_path: Path) -> None:
    alice, bob = web_server.user("alice"), web_server.user("bob")
    app = server_context(web_server.server.home, web_server.url)
    attach_weights(app, alice, shapes_detector, project="shapes", model="tiny")
    app.state.lanner.db.dispose()
    for user, name in ((alice, "Production queue"), (bob, "Bobs set")):
        made = web_server.api(user, "POST", "/api/datasets", json={"name": name, "classNames": ["circle", "square"]})
        assert made.status_code in (200, 201), made.text
    created = web_server.api(alice, "POST", "/api/deployments/alice", json={
        "project": "shapes", "model": "tiny", "deployment": "tiny-collect", "name": "tiny-collect",
        "region": "us-central1"})
    assert created.status_code == 201, created.text
    pid = None
    try:
        signed_in(page, alice, "/alice/shapes/tiny")
        row = page.locator('#deployments tr[data-slug="tiny-collect"]')
        row.get_by_role("link", name="Collect uncertain images").click()
        page.wait_for_url(f"**{PAGE}")
        expect(page.locator("#collect-today")).to_have_text("0 / 100")
        expect(page.get_by_label("Dataset").locator("option")).to_have_text(["Production queue"])  # not bob's
        page.get_by_label("Collect this endpoint’s uncertain predictions").check()
        page.get_by_label("Confidence from").fill("0.01")
        page.get_by_label("to", exact=True).fill("0.5")
        page.get_by_label("Keep (%)").fill("100")
        page.get_by_label("At most a day").fill("3")
        page.get_by_role("button", name="Save").click()
        page.wait_for_url(f"**{PAGE}")
        expect(page.locator("#messages")).to_contain_text(
            "collecting up to 3 uncertain images a day into production-queue (100% of them)")
        expect(page.locator("#collect-today")).to_have_text("0 / 3")
        expect(page.get_by_label("Collect this endpoint’s uncertain predictions")).to_be_checked()

        wait_for(lambda: web_server.api(alice, "GET", "/api/deployments/alice/tiny-collect").json()["deployment"]
                 ["status"] == "ready", timeout=120, what="the endpoint to be ready")
        pid = endpoint_pid(web_server, "tiny-collect")
        with image_file(tmp_path, 11).open("rb") as handle:
            answer = web_server.api(alice, "POST", "/api/deployments/alice/tiny-collect/predict",
                                    files={"file": handle}, data={"conf": "0.01", "imgsz": str(IMGSZ)})
        assert answer.status_code == 200 and answer.json()["images"][0]["results"], answer.text

        def captured() -> bool:
            queue = web_server.api(alice, "GET", "/api/datasets/alice/production-queue/label-next").json()
            return len(queue["images"]) == 1

        wait_for(captured, timeout=30, what="the capture after the answer")
        page.reload()
        expect(page.locator("#collect-today")).to_have_text("1 / 3")
        expect(page.locator("#collect-total")).to_have_text("1")
        screenshot(page, "deployment-collect")
        page.goto("/alice/shapes/tiny")
        expect(row.locator(".badge-active")).to_have_text("1/3 today")
        page.evaluate("document.getElementById('deployments-section').scrollIntoView()")
        screenshot(page, "model-deployments-collect")
        page.goto(PAGE)
        page.get_by_role("link", name="Label next").click()
        page.wait_for_url("**/datasets/alice/production-queue/annotate/*")
        expect(page.locator("body")).to_contain_text("tiny-collect-")  # the captured image's name
        expect(page.locator("#an-prop-status")).to_contain_text("kept from alice/shapes/tiny when this image was "
                                                                "collected")
        page.evaluate("""() => { const c = document.getElementById('an-conf'); c.value = '0.05';
            c.dispatchEvent(new Event('input')); }""")  # the tiny detector's best boxes score about 0.11
        expect(page.locator("#an-proposals > *").first).to_be_attached()
        screenshot(page, "collected-in-editor")

        # A dataset of someone else, named by hand, is refused and collecting stops.
        page.goto(PAGE)
        page.evaluate("""() => { const o = document.createElement('option'); o.value = 'bob/bobs-set';
            o.textContent = 'Bobs set'; document.getElementById('collect-dataset').append(o); }""")
        page.get_by_label("Dataset").select_option("bob/bobs-set")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#messages")).to_contain_text("Not collecting: dataset 'bob/bobs-set' not found")
    finally:
        if pid is not None and alive(pid):
            os.killpg(pid, signal.SIGKILL)
        else:
            for killed in [endpoint_pid(web_server, "tiny-collect")]:
                if killed is not None and alive(killed):
                    os.killpg(killed, signal.SIGKILL)
