"""The Review queue in a real browser against a real server with a real worker (the local executor): the owner
opens an image in the editor and presses "Review"; with no scores yet it leads to the Review page, whose button
computes them (the page follows the progress); back in the editor, "Review" opens the image with the highest
mistakenness first, then the next one, as the review API orders them."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect
from ultralytics_platform import Platform

from lanner import models_registry  # noqa: F401  (every table)
from tests.trained import tiny_weights  # noqa: F401  (a fixture)
from tests.web.conftest import WebServer, screenshot, signed_in
from tests.web.test_autolabel_browser import _dataset_with_unlabelled_images, _model_with_weights

pytestmark = pytest.mark.browser


def test_review_opens_the_most_mistaken_image_first(page, web_server: WebServer, tmp_path: Path,
                                                    tiny_weights: Path) -> None:  # noqa: F811
    alice = web_server.user("alice")
    platform = Platform(base_url=web_server.url, api_key=alice.key, timeout=60)
    _dataset_with_unlabelled_images(platform, tmp_path)
    _model_with_weights(web_server, platform, tiny_weights)
    first = platform.datasets.images("alice", "shapes", limit=1)["images"][0]["id"].rpartition("-")[2]

    signed_in(page, alice, f"/datasets/alice/shapes/annotate/{first}")
    page.locator("#an-review").click()  # no scores yet: the Review page says so and offers to compute them
    page.wait_for_url("**/datasets/alice/shapes/review")
    expect(page.locator("#review-state")).to_contain_text("No review scores yet")
    page.locator("#review-compute").click()
    expect(page.locator("#review-state")).to_have_attribute("data-scores", "fresh", timeout=240_000)
    expect(page.locator("#review-top tbody tr")).to_have_count(4)  # the labelled images: the rest are Label next's
    screenshot(page, "review-scores")

    ranked = web_server.api(alice, "GET", "/api/datasets/alice/shapes/review/images").json()["images"]
    assert len(ranked) == 4
    assert [r["mistakenness"] for r in ranked] == sorted((r["mistakenness"] for r in ranked), reverse=True)
    page.goto(f"/datasets/alice/shapes/annotate/{first}")
    page.locator("#an-review").click()
    page.wait_for_url(f"**/datasets/alice/shapes/annotate/{ranked[0]['key']}?review=1")
    expect(page.locator("#an-status")).not_to_have_attribute("data-state", "loading")
    expect(page.locator("#an-review-why")).to_contain_text(f"mistakenness {ranked[0]['mistakenness']:.2f}")
    screenshot(page, "review-first")
    page.locator("#an-review").click()  # the first is reviewed in this pass: the second comes next
    page.wait_for_url(f"**/datasets/alice/shapes/annotate/{ranked[1]['key']}?review=1")
