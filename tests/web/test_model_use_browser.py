"""A completed model's page in a real browser against a real server with real export workers and real shared
inference: Export ONNX with one click, watch the job finish (the list refreshes itself), download the file (a
valid ONNX model: it loads with ``onnx`` and its graph checks); Preview an image, chosen and then dropped, and
see the model's boxes drawn on it and listed."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.deployments.conftest import image_file
from tests.deployments.test_e2e_local import server_context
from tests.inference.conftest import shapes_detector  # noqa: F401  (a fixture)
from tests.trained import attach_weights, localizer_weights  # noqa: F401  (a fixture)
from tests.web.conftest import WebServer, a_run, screenshot, signed_in, webhook

pytestmark = pytest.mark.browser


def with_weights(web_server: WebServer, weights: Path, model: str) -> str:
    """alice's completed model ``shapes/<model>`` with ``weights`` and the training arguments the checkpoint
    records (what a finished run leaves on the model); returns its page."""
    import torch

    from lanner.projects.models import ModelRecord

    saved = torch.load(weights, map_location="cpu", weights_only=False).get("train_args") or {}
    app = server_context(web_server.server.home, web_server.url)
    model_id = attach_weights(app, web_server.user("alice"), weights, project="shapes", model=model)
    with app.state.lanner.db.session() as session:
        session.get(ModelRecord, model_id).train_args = {k: v for k, v in saved.items()
                                                         if isinstance(v, int | float | str | bool)}
        session.commit()
    app.state.lanner.db.dispose()
    return f"/alice/shapes/{model}"


@pytest.fixture
def tiny_model(web_server: WebServer, shapes_detector: Path) -> str:  # noqa: F811
    return with_weights(web_server, shapes_detector, "tiny")


def test_export_onnx_from_the_page_and_download_it(page: Any, web_server: WebServer, tiny_model: str,
                                                   tmp_path: Path) -> None:
    signed_in(page, web_server.user("alice"), tiny_model)
    expect(page.locator("#export-list")).to_contain_text("No export yet")
    page.get_by_role("button", name="Export ONNX").click()
    page.wait_for_url(f"**{tiny_model}#exports")
    expect(page.locator("#messages")).to_contain_text("Exporting to ONNX")
    row = page.locator('#exports tr[data-format="onnx"]')
    expect(row).to_have_attribute("data-status", re.compile("queued|starting|running"))
    expect(row).to_have_attribute("data-status", "completed", timeout=240_000)  # htmx followed it by itself
    expect(row.locator("td").nth(2)).to_have_text(re.compile(r"^\d+\.\d MB$"))
    expect(page.locator("#export-list")).not_to_have_attribute("hx-get", re.compile("."))  # done: no more polling
    page.evaluate("document.getElementById('exports-section').scrollIntoView()")
    screenshot(page, "model-export")

    with page.expect_download() as info:
        row.get_by_role("link", name="Download tiny.onnx").click()
    download = info.value
    assert download.suggested_filename == "tiny.onnx"
    path = tmp_path / "tiny.onnx"
    download.save_as(path)
    import onnx

    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    assert model.graph.node and model.graph.input[0].name == "images"


def test_preview_draws_the_models_boxes(page: Any, web_server: WebServer, localizer_weights: Path,  # noqa: F811
                                        tmp_path: Path) -> None:
    """The well-trained one-class detector (``tests.trained.shape_localizer``, trained at 64 px): Preview starts
    at that size, where it finds the shapes (at the API's default 640 px it finds none in this image)."""
    signed_in(page, web_server.user("alice"), with_weights(web_server, localizer_weights, "localizer"))
    expect(page.locator("#preview-imgsz")).to_have_value("64")
    page.locator("#preview-conf").fill("0.5")
    page.set_input_files("#preview-file", str(image_file(tmp_path)))  # choosing it runs it
    canvas = page.locator("#preview-canvas")
    expect(canvas).to_be_visible(timeout=60_000)
    expect(canvas).to_have_attribute("data-boxes", re.compile(r"^[1-9]\d*$"))
    expect(page.locator("#preview-summary")).to_contain_text("(detect)")
    rows = page.locator("#preview-results tbody tr")
    expect(rows.first.locator("td").first).to_have_text(re.compile(r"shape$"))  # the model's own class
    expect(rows.first.locator("td").nth(1)).to_have_text(re.compile(r"^\d+\.\d %$"))
    assert rows.count() == min(int(canvas.get_attribute("data-boxes")), 20) + (int(canvas.get_attribute(
        "data-boxes")) > 20)  # 20 listed at most, then how many more
    expect(canvas).to_have_attribute("data-image-width", "160")  # the image's own size (drawn sharper)
    drawn = page.evaluate("""() => {
        const c = document.getElementById('preview-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let coloured = 0;
        for (let i = 0; i < d.length; i += 4) { if (d[i] === 0x24 && d[i + 1] === 0x56 && d[i + 2] === 0xd6 ||
            d[i] === 0xd6 && d[i + 1] === 0x46 && d[i + 2] === 0x2f) { coloured++; } }
        return coloured; }""")
    assert drawn > 0  # box outlines in the class colours, over the image
    page.evaluate("document.getElementById('preview').scrollIntoView()")
    screenshot(page, "model-preview")

    other = base64.b64encode(image_file(tmp_path, seed=9).read_bytes()).decode()
    page.evaluate("""(data) => {
        const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
        const transfer = new DataTransfer();
        transfer.items.add(new File([bytes], 'dropped.jpg', {type: 'image/jpeg'}));
        document.getElementById('preview-canvas').dataset.boxes = '';
        const drop = new DragEvent('drop', {dataTransfer: transfer, bubbles: true, cancelable: true});
        document.getElementById('preview-drop').dispatchEvent(drop);
    }""", other)
    expect(canvas).to_have_attribute("data-boxes", re.compile(r"^[1-9]\d*$"), timeout=60_000)  # the dropped one
    expect(page.locator("#preview-summary")).to_contain_text("(detect)")


def test_a_run_that_ends_while_its_page_is_open_says_to_reload(page: Any, web_server: WebServer) -> None:
    """Its weights, final plots, Preview and Export are rendered by the server: the page says so and links to
    itself, rather than leaving a finished run without them."""
    bob = web_server.user("bob")
    model_id = a_run(web_server, bob, "ends", 2)
    signed_in(page, bob, "/bob/shapes/ends")
    expect(page.locator("#model-status")).to_have_text("running")
    expect(page.locator("#run-ended")).to_be_hidden()
    webhook(web_server, bob, "training_complete", {"results": {"metrics": {"fitness": 0.3}}}, modelId=model_id)
    expect(page.locator("#model-status")).to_have_text("completed", timeout=15_000)
    notice = page.locator("#run-ended")
    expect(notice).to_be_visible()
    notice.get_by_role("link", name="reload the page").click()
    page.wait_for_load_state("load")
    expect(page.locator("#run-ended")).to_be_hidden()
    expect(page.locator("#model-status")).to_have_text("completed")
