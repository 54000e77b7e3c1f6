from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lanner.synthetic import make_detection_dataset
from tests.web.conftest import WebServer, signed_in

pytestmark = [pytest.mark.browser]


def test_shot(page: Any, web_server: WebServer, tmp_path: Path) -> None:
    alice = web_server.user("alice", credits=20)
    root = make_detection_dataset(tmp_path / "shapes", train=8, val=4, size=64).parent
    web_server.cli("datasets", "import", str(root), "--owner", "alice", "--name", "shapes")
    signed_in(page, alice, "/")
    page.screenshot(path="/tmp/d2shots/home.png")
    page.goto("/train?dataset=ul://alice/datasets/shapes")
    page.locator("#gpu-table").wait_for()
    page.wait_for_timeout(500)
    page.screenshot(path="/tmp/d2shots/train.png")
    page.screenshot(path="/tmp/d2shots/train-full.png", full_page=True)
    page.locator("#chart-legend").scroll_into_view_if_needed()
    page.screenshot(path="/tmp/d2shots/train-chart.png")
    page.locator("#gpu-elsewhere summary").click()
    page.screenshot(path="/tmp/d2shots/train-open.png")
    print("HEIGHT", page.evaluate("document.documentElement.scrollHeight"))
