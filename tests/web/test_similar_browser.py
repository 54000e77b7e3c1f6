"""The "Similar" strip in a real browser against a real server: an image page of an analysed dataset shows the
nearest images with their cosine similarity; a click opens that image's page, whose strip shows the first image
again; the label editor loads the strip for each image it opens. Vectors are stored as a worker's delivery
stores them (tests/web/test_similar_pages.py ``embed``), so no model runs here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import WebServer, screenshot, signed_in
from tests.web.test_similar_pages import embed

pytestmark = pytest.mark.browser


class _Server:  # ``embed`` reads ``app.state.lanner.db``: the server's database, written from the test
    def __init__(self, web_server: WebServer) -> None:
        self.state = type("State", (), {"lanner": type("Ctx", (), {"db": web_server.db})()})()


def test_image_page_similar_strip_click_opens_the_similar_image(page: Any, web_server: WebServer,
                                                                 tmp_path: Path) -> None:
    alice = web_server.user("alice")
    web_server.upload_shapes(alice, "shapes", tmp_path, train=6, val=3, size=96, seed=5)
    ids = embed(_Server(web_server), "alice", "shapes")
    first = ids["train_0000.jpg"]
    signed_in(page, alice, f"/datasets/alice/shapes/images/{first}")
    strip = page.locator("#similar-strip")
    expect(strip).to_have_attribute("data-state", "ready")
    links = strip.locator("a.similar-link")
    expect(links.first).to_be_visible()
    assert 1 <= links.count() <= 8
    expect(strip.locator(".similar-score").first).to_have_text(re.compile(r"^-?\d\.\d\d cosine$"))
    page.locator("#similar").scroll_into_view_if_needed()
    # Each thumbnail is drawn (a broken or blocked link leaves an empty box): every image loaded, with pixels.
    page.wait_for_function("""() => [...document.querySelectorAll('#similar-strip img')].every(
        (img) => img.complete && img.naturalWidth > 0)""", timeout=15_000)
    screenshot(page, "dataset-image-similar")
    target = links.first.get_attribute("href")
    name = links.first.locator("img").get_attribute("alt")
    links.first.click()
    page.wait_for_url(f"**{target}")
    expect(page.locator("h1")).to_have_text(name)
    back = page.locator(f"#similar-strip a.similar-link[href$='{first}']")  # similarity is symmetric
    expect(back).to_have_count(1)

    page.goto(f"/datasets/alice/shapes/annotate/{first.split('-')[1]}")
    expect(page.locator("#an-similar-panel #similar-strip")).to_have_attribute("data-state", "ready")
    expect(page.locator("#an-similar-panel a.similar-link").first).to_be_visible()
    page.locator("#an-similar-panel").scroll_into_view_if_needed()
    screenshot(page, "annotate-similar")
    page.locator("#an-next").click()  # the editor opens the next image in place: the strip follows it
    expect(page.locator("#an-editor")).not_to_have_attribute("data-loaded", first.split("-")[1])
    expect(page.locator(f"#an-similar-panel a.similar-link[href$='{first}']")).to_have_count(1)  # not on itself

    page.goto("/datasets/alice/shapes")  # the health section has the embedding findings
    expect(page.locator("#embedding-health")).to_have_attribute("data-state", "fresh")
    expect(page.locator("#embedding-near-count")).to_be_visible()
    page.locator("#health").scroll_into_view_if_needed()
    screenshot(page, "dataset-health-embeddings")
