"""The dataset map in a real browser against a real server: from the dataset page's "Map" link, the map draws
(deck.gl, WebGL under the page's CSP: any violation fails the test), hovering a point shows that image's
thumbnail, and a lasso around some points opens the grid filtered to exactly those images, where a bulk
action (move to a split) applies to them, and "Label these" opens the editor on the first of them, whose "Label
next" walks only them and says when they are all labelled.

Seven images, their vectors in three far-apart groups, stored as a worker's delivery stores them
(tests/web/test_similar_pages.py ``embed``); the map is laid out inside the first request for it (fewer than
``layout.MIN_UMAP`` points: principal axes, no UMAP), so no model runs here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.embeddings.models import EmbeddingJob
from lanner.errors import NotFound
from lanner.projects import service as projects_service
from tests.web.conftest import WebServer, screenshot, signed_in
from tests.web.test_similar_browser import _Server
from tests.web.test_similar_pages import DIM, embed

pytestmark = pytest.mark.browser
CENTRES = np.random.default_rng(7).normal(size=(3, DIM)) * 5


def grouped(name: str) -> np.ndarray:
    """Image ``..._000n.jpg``'s vector: near centre n % 3."""
    n = int(name.rsplit("_", 1)[-1].split(".")[0]) + (10 if name.startswith("val") else 0)
    return CENTRES[n % 3] + np.random.default_rng(n).normal(size=DIM) * 0.5


def model(web_server: WebServer, owner: str, name: str) -> str:
    """A detection model of ``owner``'s with weights (a digest: nothing loads them here), trained on
    ``owner/shapes`` when ``name`` is "trained"; its id."""
    with web_server.db.session() as session:
        principal = Principal.of(accounts_service.require_user(session, username=owner))
        try:
            project = projects_service.get_project(session, principal, owner=owner, slug="models")
        except NotFound:
            project = projects_service.create_project(session, principal, slug="models", name="models")
        record = projects_service.create_model(
            session, project, name=name, task="detect", status="completed", weights_sha256=name[0] * 64,
            train_args={"data": f"ul://{owner}/datasets/shapes"} if name == "trained" else {})
        session.commit()
        return record.id


def test_map_hover_shows_the_thumbnail_and_a_lasso_filters_the_grid_for_a_bulk_move(page: Any,
                                                                                      web_server: WebServer,
                                                                                      tmp_path: Path) -> None:
    alice = web_server.user("alice")
    web_server.upload_shapes(alice, "shapes", tmp_path, train=4, val=3, size=96, seed=5)
    signed_in(page, alice, "/datasets/alice/shapes")
    page.locator("#map-link").click()
    page.wait_for_url("**/datasets/alice/shapes/map")
    view = page.locator("#map-view")  # no model on the server: what is needed, and the way to it
    expect(view).to_have_attribute("data-state", "none")
    expect(page.locator("#map-no-model a")).to_have_attribute("href", re.compile(r"^/train\?dataset="))
    screenshot(page, "dataset-map-no-model")

    trained, chosen = model(web_server, "alice", "trained"), model(web_server, "alice", "chosen")
    page.reload()  # models: pick one, or the automatic pick (the one trained on this dataset)
    expect(page.locator("#map-compute button")).to_be_visible()
    field = page.locator("#map-model")
    expect(field).to_have_value("auto")
    expect(field.locator("option[value=auto]")).to_have_text(
        "Automatic (newest trained on this dataset): ul://alice/models/trained")
    screenshot(page, "dataset-map-none")
    field.select_option(label="ul://alice/models/chosen")
    page.locator("#map-compute button").click()
    expect(view).to_have_attribute("data-state", "embedding")
    with web_server.db.session() as session:
        job = session.scalar(select(EmbeddingJob).order_by(EmbeddingJob.created_at.desc()).limit(1))
        assert (job.model_id, job.chosen) == (chosen, True) and job.model_id != trained
    cancelled = web_server.api(alice, "DELETE", "/api/datasets/alice/shapes/embeddings")  # no worker needed here
    assert cancelled.json()["cancelled"] in (job.id, None), cancelled.text

    ids = embed(_Server(web_server), "alice", "shapes", vector_of=grouped)
    page.reload()
    expect(view).to_have_attribute("data-state", "ready")
    expect(page.locator("#map-summary")).to_contain_text("7 images")
    expect(page.locator("#map-legend li").first).to_be_visible()  # the default colouring's names
    keys = page.evaluate("lannerMap.keys")
    assert page.evaluate("lannerMap.drawnAsPoints")  # deck.gl's shaders took map-points.js's edits
    assert sorted(keys) == sorted(i.split("-", 1)[1] for i in ids.values())
    screen = page.evaluate("lannerMap.keys.map((k, i) => lannerMap.screenPosition(i))")

    # hover: the image of the point under the pointer (of one of those drawn there: points may overlap), drawn
    name_of = {i.split("-", 1)[1]: name for name, i in ids.items()}
    under = {name_of[k] for k, (px, py) in zip(keys, screen, strict=True)
             if abs(px - screen[0][0]) <= 6 and abs(py - screen[0][1]) <= 6}
    page.mouse.move(*screen[0])
    expect(page.locator("#map-tooltip")).to_be_visible()
    expect(page.locator("#map-tooltip-img")).to_have_attribute("alt", re.compile(r"\.jpg$"))
    assert page.locator("#map-tooltip-img").get_attribute("alt") in under
    expect(page.locator("#map-tooltip-name")).to_contain_text(page.locator("#map-tooltip-img").get_attribute("alt"))
    page.wait_for_function("""() => { const img = document.getElementById('map-tooltip-img');
        return img.complete && img.naturalWidth > 0; }""", timeout=15_000)
    screenshot(page, "dataset-map")

    # lasso: a square around the first point takes its group, not the others
    x, y = screen[0]
    corners = [(x - 25, y - 25), (x + 25, y - 25), (x + 25, y + 25), (x - 25, y + 25)]
    inside = sorted(k for k, (px, py) in zip(keys, screen, strict=True) if abs(px - x) < 25 and abs(py - y) < 25)
    assert 1 <= len(inside) < len(keys)
    page.locator("#map-lasso").click()
    page.mouse.move(*corners[0])
    page.mouse.down()
    for corner in [*corners[1:], corners[0]]:
        page.mouse.move(*corner, steps=4)
    page.mouse.up()
    expect(page.locator("#map-selected-count")).to_have_text(f"{len(inside)} image{'s' if len(inside) > 1 else ''} "
                                                             "selected")
    boxes = page.locator("#map-grid-slot #ds-grid .ds-select")  # the grid, filtered to the lasso, under the map
    expect(boxes).to_have_count(len(inside))
    assert sorted(b.get_attribute("value").split("-", 1)[1] for b in boxes.all()) == inside
    expect(page.locator("#map-grid-slot #grid-count")).to_contain_text(f"{len(inside)} image")
    page.locator("#map-grid-slot").scroll_into_view_if_needed()
    screenshot(page, "dataset-map-lasso")

    page.locator("#ds-bulk-page").click()  # the grid's bulk action, on the lasso's images
    expect(page.locator("#ds-bulk-count")).to_have_text(f"{len(inside)} selected")
    page.locator("#ds-bulk-split").select_option("test")
    page.locator("#ds-bulk-move").click()
    expect(page.locator("#map-grid-slot #ds-grid li[data-split=test]")).to_have_count(len(inside))
    listed = web_server.api(alice, "GET", "/api/datasets/alice/shapes/images?limit=100").json()["images"]
    moved = sorted(i["id"].split("-", 1)[1] for i in listed if i["split"] == "test")
    assert moved == inside
    page.locator("#map-colour").select_option("split")  # the map follows: its legend counts the moved images
    expect(page.locator("#map-legend li", has_text="test")).to_contain_text(f"{len(inside)} image")

    page.locator("#map-open").click()  # the same selection on the dataset page, with its filters
    page.wait_for_url("**/datasets/alice/shapes?sel=*")
    expect(page.locator("#ds-selection-count")).to_have_text(f"{len(inside)} image{'s' if len(inside) > 1 else ''}")
    expect(page.locator("#ds-grid .ds-select")).to_have_count(len(inside))


def _relabel(web_server: WebServer, user: Any, key: str, labels: list) -> None:
    """Save an image's labels as the editor does (``PUT .../annotate/{key}`` from its revision)."""
    url = f"/api/datasets/alice/picks/annotate/{key}"
    revision = web_server.api(user, "GET", url).json()["revision"]
    answer = web_server.api(user, "PUT", url, json={"labels": labels, "revision": revision,
                                                                    "editId": f"t-{key}-{revision}"})
    assert answer.status_code == 200, answer.text


def test_label_these_from_the_lasso_walks_only_the_selection(page: Any, web_server: WebServer,
                                                              tmp_path: Path) -> None:
    alice = web_server.user("alice")
    web_server.upload_shapes(alice, "picks", tmp_path, train=4, val=3, size=96, seed=5)
    ids = embed(_Server(web_server), "alice", "picks", vector_of=grouped)
    name_of = {i.split("-", 1)[1]: name for name, i in ids.items()}
    for key in name_of:  # none labelled: "Label next" could go anywhere in the dataset
        _relabel(web_server, alice, key, [])
    signed_in(page, alice, "/datasets/alice/picks/map")
    expect(page.locator("#map-view")).to_have_attribute("data-state", "ready")
    keys = page.evaluate("lannerMap.keys")
    screen = page.evaluate("lannerMap.keys.map((k, i) => lannerMap.screenPosition(i))")
    x, y = screen[0]
    inside = [k for k, (px, py) in zip(keys, screen, strict=True) if abs(px - x) < 25 and abs(py - y) < 25]
    inside.sort(key=lambda k: (name_of[k], k))  # the grid's order, the queue's
    assert 2 <= len(inside) < len(keys)
    page.locator("#map-lasso").click()
    page.mouse.move(x - 25, y - 25)
    page.mouse.down()
    for corner in [(x + 25, y - 25), (x + 25, y + 25), (x - 25, y + 25), (x - 25, y - 25)]:
        page.mouse.move(*corner, steps=4)
    page.mouse.up()
    label = page.locator("#map-grid-slot #ds-bulk-label")
    expect(label).to_have_text(f"Label these {len(inside)}")
    page.locator("#map-grid-slot").scroll_into_view_if_needed()
    screenshot(page, "dataset-map-label-these")

    label.click()  # the editor on the selection's first image, in its queue
    page.wait_for_url(f"**/datasets/alice/picks/annotate/{inside[0]}?sel=*")
    expect(page.locator("#an-editor")).to_have_attribute("data-loaded", inside[0])
    note = page.locator("#an-queue-text")
    expect(note).to_have_text(f"Labelling {len(inside)} selected images · {len(inside)} unlabelled")
    screenshot(page, "annotate-selection-queue")
    for key in inside[1:]:  # "Label next": the selection's next image each time, never one outside it
        page.locator("#an-label-next").click()
        expect(page.locator("#an-editor")).to_have_attribute("data-loaded", key)
        assert re.search(rf"/annotate/{key}\?sel=\w+$", page.url), page.url
    page.locator("#an-label-next").click()  # round again: the first is still unlabelled
    expect(page.locator("#an-editor")).to_have_attribute("data-loaded", inside[0])

    for key in inside:  # all labelled (here through the API the editor saves with)
        _relabel(web_server, alice, key, [{"classId": 0, "bbox": [0.5, 0.5, 0.2, 0.2]}])
    page.locator("#an-label-next").click()  # the queue is done: said so, and the whole dataset offered
    expect(note).to_have_text(f"All {len(inside)} selected images are labelled.")
    leave = page.locator("#an-queue-leave")
    expect(leave).to_have_text("label the whole dataset")
    expect(page.locator("#an-editor")).to_have_attribute("data-loaded", inside[0])
    screenshot(page, "annotate-selection-done")
    leave.click()  # out of the selection: the dataset's own queue, on an image outside it
    page.wait_for_url(re.compile(r"/annotate/\w+$"))
    assert page.url.rsplit("/", 1)[1] not in inside

    # the dataset page: two images ticked are a selection too, made into a new dataset of just them
    page.goto(web_server.url + "/datasets/alice/picks")
    ticked = page.locator("#ds-grid .ds-select")
    ticked.nth(0).check()
    ticked.nth(1).check()
    picked = sorted(ticked.nth(i).get_attribute("value").split("-", 1)[1] for i in range(2))
    expect(page.locator("#ds-bulk-label")).to_have_text("Label 2 selected")
    page.locator("#ds-bulk-clone").click()
    page.wait_for_url("**/datasets/alice/picks-selection")
    expect(page.locator("body")).to_contain_text("made of 2 selected images from picks")
    copied = page.locator("#ds-grid .ds-select")
    expect(copied).to_have_count(2)
    assert sorted(b.get_attribute("value").split("-", 1)[1] for b in copied.all()) == picked
    screenshot(page, "dataset-from-selection")

    # ... and three ticked added to that one: the two it holds already are skipped, and said so
    page.goto(web_server.url + "/datasets/alice/picks")
    for n in range(3):
        ticked.nth(n).check()
    expect(page.locator("#ds-bulk-adopt")).to_have_text("Add 3 selected to")
    page.locator("#ds-bulk-target").select_option("alice/picks-selection")
    screenshot(page, "dataset-add-selection-to")
    page.locator("#ds-bulk-adopt").click()
    page.wait_for_url("**/datasets/alice/picks-selection")
    expect(page.locator("body")).to_contain_text(
        "Added 1 image from picks to picks (selection), with their labels and splits; 2 were already there.")
    expect(copied).to_have_count(3)
