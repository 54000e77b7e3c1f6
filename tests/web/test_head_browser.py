"""A newcomer's first analysis in a real browser against a real server whose queue runs the real embedding worker:
from the dataset page's Map link, "Compute embeddings", the progress, then, once every image is embedded, the
page says the copy-detection head is being trained (a minute or two on a real dataset, at 100 % all along:
without the line it would look stuck), and the map is drawn when the job is done. The worker is paused
(SIGSTOP) while the line is checked, so the check never races a fast worker."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.servers import start_server
from tests.web.conftest import WebServer, screenshot, signed_in

pytestmark = pytest.mark.browser
IMAGES = 40


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """A server that trains a head from 40 images (200 by default) and embeds at 64 px."""
    web = WebServer(start_server(tmp_path_factory.mktemp("head-server"), LANNER_EMBEDDING_POLL_SECONDS="0.2",
                                 LANNER_EMBEDDING_IMGSZ="64", LANNER_EMBEDDING_HEAD_MIN_IMAGES=str(IMAGES)))
    yield web
    web.stop()


def _job(web_server: WebServer) -> tuple[str, int, int, str | None] | None:
    with sqlite3.connect(web_server.server.home / "lanner.db") as db:
        return db.execute("SELECT status, processed, total, external_id FROM embedding_jobs").fetchone()


def test_the_map_says_when_the_head_is_being_trained_then_draws(page: Any, web_server: WebServer, tmp_path: Path,
                                                                 tiny_weights: Path) -> None:
    alice = web_server.user("alice")
    official = tmp_path / "yolo11n.pt"
    official.write_bytes(tiny_weights.read_bytes())
    web_server.cli("models", "add-official", str(official))  # the server's model: nothing trained on the dataset
    web_server.upload_shapes(alice, "shapes", tmp_path, train=IMAGES, val=0, size=64, seed=3)
    signed_in(page, alice, "/datasets/alice/shapes")
    page.locator("#map-link").click()
    page.wait_for_url("**/datasets/alice/shapes/map")
    page.locator("#map-compute").get_by_role("button", name="Compute embeddings").click()

    deadline = time.monotonic() + 240
    while not ((job := _job(web_server)) and job[0] == "running" and job[2] and job[1] >= job[2]):
        assert job is None or job[0] in ("queued", "starting", "running"), job
        assert time.monotonic() < deadline, f"every image embedded: still waiting, {job}"
        time.sleep(0.05)
    pid = int(str(job[3]).split(":")[0])
    os.kill(pid, signal.SIGSTOP)  # the worker holds still at its head stage while the page is read
    try:
        text = page.locator("#map-progress-text")
        expect(text).to_have_text(f"All {IMAGES} images embedded; training the copy-detection head that finds "
                                  "edited copies (a minute or two)…", timeout=20_000)
        expect(page.locator("#map-progress-bar")).to_have_attribute("value", "100")
        screenshot(page, "dataset-map-training-head")
    finally:
        os.kill(pid, signal.SIGCONT)
    expect(page.locator("#map-view")).to_have_attribute("data-state", "ready", timeout=240_000)
    expect(page.locator("#map-summary")).to_contain_text(str(IMAGES))
    screenshot(page, "dataset-map-after-head")
    with sqlite3.connect(web_server.server.home / "lanner.db") as db:
        assert db.execute("SELECT images FROM embedding_heads").fetchall() == [(IMAGES,)]
