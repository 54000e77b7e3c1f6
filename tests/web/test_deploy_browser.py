"""A model's endpoint from its page, in a real browser against a real server that runs real serving processes:
deploy it from the form, watch it become ready (the table refreshes itself), try it with an image (the boxes
the endpoint found are drawn on a canvas), then delete it (its process ends). The form's region picker names
each region's place, grouped by area."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.deployments.places import AREAS
from lanner.deployments.schemas import REGIONS
from tests.deployments.conftest import image_file
from tests.deployments.test_e2e_local import alive, server_context
from tests.inference.conftest import shapes_detector  # noqa: F401  (a fixture)
from tests.servers import wait_for
from tests.trained import attach_weights
from tests.web.conftest import WebServer, a_run, screenshot, signed_in

pytestmark = pytest.mark.browser


def endpoint_pid(web_server: WebServer, slug: str) -> int | None:
    from sqlalchemy import select

    from lanner.deployments.models import Deployment

    with web_server.db.session() as session:
        external = session.scalar(select(Deployment.external_id).where(Deployment.slug == slug))
    return int(external.split(":", 1)[0]) if external and external[0].isdigit() else None


def test_deploy_try_and_delete_from_the_model_page(page: Any, web_server: WebServer, shapes_detector: Path,  # noqa: F811
                                                   tmp_path: Path) -> None:
    alice = web_server.user("alice")
    app = server_context(web_server.server.home, web_server.url)
    attach_weights(app, alice, shapes_detector, project="shapes", model="tiny")
    app.state.lanner.db.dispose()
    pid = None
    try:
        signed_in(page, alice, "/alice/shapes/tiny")
        expect(page.locator("#deployment-list")).to_contain_text("Not deployed yet")
        page.get_by_label("Endpoint name").fill("tiny-web")
        page.get_by_label("Region").select_option("europe-west4")
        page.get_by_role("button", name="Deploy", exact=True).click()
        page.wait_for_url("**/alice/shapes/tiny#deployments")
        expect(page.locator("#messages")).to_contain_text("Deploying tiny-web with pytorch")
        row = page.locator('#deployments tr[data-slug="tiny-web"]')
        expect(row).to_have_attribute("data-ready", "true", timeout=90_000)  # htmx refreshed the table by itself
        expect(row.locator(".badge")).to_have_text("ready")
        expect(row).to_contain_text("serving with PyTorch")
        pid = endpoint_pid(web_server, "tiny-web")
        assert pid is not None and alive(pid)

        expect(page.locator("#try-deployment option")).to_have_count(1)
        page.set_input_files("#try-file", str(image_file(tmp_path)))
        page.locator("#try-it").get_by_label("Confidence").fill("0.01")
        page.get_by_role("button", name="Run").click()
        canvas = page.locator("#try-canvas")
        expect(canvas).to_be_visible(timeout=30_000)
        expect(canvas).to_have_attribute("data-boxes", re.compile(r"^[1-9]\d*$"))
        expect(page.locator("#try-summary")).to_contain_text("(detect)")
        expect(canvas).to_have_attribute("data-image-width", "160")  # the image's own size (drawn sharper)
        drawn = page.evaluate("""() => {
            const c = document.getElementById('try-canvas');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let coloured = 0;
            for (let i = 0; i < d.length; i += 4) { if (d[i] === 0x24 && d[i + 1] === 0x56 && d[i + 2] === 0xd6 ||
                d[i] === 0xd6 && d[i + 1] === 0x46 && d[i + 2] === 0x2f) { coloured++; } }
            return coloured; }""")
        assert drawn > 0  # box outlines in the class colours, over the image
        page.reload()  # the request shows in the table and its chart
        expect(row.locator("td").nth(3)).to_contain_text("1", timeout=30_000)
        expect(row.locator("[data-latency]")).to_have_attribute("data-points", "1")
        page.set_input_files("#try-file", str(image_file(tmp_path)))
        page.locator("#try-it").get_by_label("Confidence").fill("0.1")  # the tiny detector's best boxes only
        page.get_by_role("button", name="Run").click()
        expect(page.locator("#try-summary")).to_contain_text("square 0.11")
        page.locator("#deployments-section").scroll_into_view_if_needed()
        page.evaluate("document.getElementById('deployments-section').scrollIntoView()")
        screenshot(page, "model-deployments")

        page.get_by_role("button", name="Delete tiny-web").click()
        page.wait_for_url("**/alice/shapes/tiny#deployments")
        expect(page.locator("#messages")).to_contain_text("tiny-web deleted")
        expect(page.locator('#deployments tr[data-slug="tiny-web"]')).to_have_count(0)
        wait_for(lambda: not alive(pid), timeout=30, what=f"the serving process {pid} to end")
    finally:
        if pid is not None and alive(pid):
            os.killpg(pid, signal.SIGKILL)


def test_the_region_picker_names_places_by_area(page: Any, web_server: WebServer) -> None:
    """Issue 27's "42 regions in one unlabelled box": the SDK's 42 region ids were one flat list of bare ids."""
    alice = web_server.user("alice")
    a_run(web_server, alice, "regions", 5)
    signed_in(page, alice, "/alice/shapes/regions")
    picker = page.get_by_role("combobox", name="Region")
    expect(picker).to_have_value("us-central1")
    expect(picker.locator("option:checked")).to_have_text("Iowa, USA (us-central1)")
    groups = picker.locator("optgroup")
    expect(groups).to_have_count(len(AREAS))
    assert [groups.nth(i).get_attribute("label") for i in range(len(AREAS))] == list(AREAS)
    shown = picker.locator("option").all_inner_texts()
    assert len(shown) == len(REGIONS) == 42
    ids = [re.fullmatch(r"[A-Z][^()]+ \(([a-z0-9-]+)\)", t) for t in shown]  # a place, then the SDK's id
    assert all(ids) and sorted(m.group(1) for m in ids if m) == sorted(REGIONS), shown
    assert picker.locator("optgroup[label='Europe'] option").all_inner_texts()[:2] == [
        "Belgium (europe-west1)", "Berlin, Germany (europe-west10)"]  # by place within an area
    picker.select_option(label="Frankfurt, Germany (europe-west3)")
    expect(picker).to_have_value("europe-west3")
