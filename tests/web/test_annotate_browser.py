"""The label editor in a real browser against a real server: a box, a polygon and a set of keypoints drawn on a
detect, a segment and a pose dataset, a class changed, undone and redone, and everything read back from the
annotation API and again after a reload; edits made while the API cannot be reached (Playwright routes fail the
saves, the first one after the server applied it) are kept, survive a reload and are saved once when it comes
back; two pages editing one image get the conflict dialog; the shortcuts dialog opens at its top. Fails on any
browser error (see ``conftest.page``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.synthetic import make_detection_dataset
from tests.web.conftest import WebServer, check_recorder, new_context, screenshot, signed_in

pytestmark = pytest.mark.browser


def import_dataset(web_server: WebServer, folder: Path, name: str, task: str) -> None:
    """The synthetic shapes as a detect, segment (each square as a 4-point polygon) or pose (3 keypoints) set."""
    data = make_detection_dataset(folder / name, train=3, val=1, size=96, seed=3)
    if task != "detect":
        extra = "task: segment\n" if task == "segment" else "kpt_shape: [3, 3]\n"
        data.write_text(data.read_text() + extra)
        for path in (folder / name / "labels").rglob("*.txt"):
            rows = []
            for line in path.read_text().split("\n"):
                if not line:
                    continue
                c, cx, cy, w, h = line.split()
                x0, y0, x1, y1 = (float(cx) - float(w) / 2, float(cy) - float(h) / 2,
                                  float(cx) + float(w) / 2, float(cy) + float(h) / 2)
                rows.append(f"{c} {x0:.4f} {y0:.4f} {x1:.4f} {y0:.4f} {x1:.4f} {y1:.4f} {x0:.4f} {y1:.4f}"
                            if task == "segment" else f"{line} {cx} {cy} 2 {x0:.4f} {y0:.4f} 2 {x1:.4f} {y1:.4f} 1")
            path.write_text("\n".join(rows) + "\n")
    web_server.cli("datasets", "import", str(data.parent), "--owner", "alice", "--name", name)


@pytest.fixture(scope="module")
def datasets(web_server: WebServer, tmp_path_factory: pytest.TempPathFactory) -> WebServer:
    web_server.user("alice")
    folder = tmp_path_factory.mktemp("annotate")
    for name, task in (("boxes", "detect"), ("shapes-seg", "segment"), ("people", "pose")):
        import_dataset(web_server, folder, name, task)
    return web_server


def api_state(web_server: WebServer, slug: str, key: str) -> dict[str, Any]:
    response = web_server.api(web_server.user("alice"), "GET", f"/api/datasets/alice/{slug}/annotate/{key}")
    assert response.status_code == 200, response.text
    return response.json()


def editor(page: Any) -> dict[str, Any]:
    return page.evaluate("({key: lannerEditor.key, labels: lannerEditor.labels, revision: lannerEditor.revision})")


def open_editor(page: Any, slug: str, key: str | None = None) -> dict[str, Any]:
    page.goto(f"/datasets/alice/{slug}/annotate" + (f"/{key}" if key else ""))
    loaded(page)
    saved(page)
    return editor(page)


def loaded(page: Any) -> None:
    page.locator("#an-editor[data-loaded]").wait_for(state="attached")


def saved(page: Any) -> None:
    expect(page.locator("#an-status")).to_have_attribute("data-state", "saved")


def at(page: Any, fx: float, fy: float) -> tuple[float, float]:
    """Where on the screen the image point (fx, fy) (fractions of its size) is, under the editor's zoom and pan."""
    return page.evaluate("""([fx, fy]) => { const c = lannerEditor.canvas, r = c.svg.getBoundingClientRect();
        return [r.left + c.tx + fx * c.W * c.scale, r.top + c.ty + fy * c.H * c.scale]; }""", [fx, fy])


def drag(page: Any, a: tuple[float, float], b: tuple[float, float]) -> None:
    page.mouse.move(*at(page, *a))
    page.mouse.down()
    page.mouse.move(*at(page, *b), steps=4)
    page.mouse.up()


def click(page: Any, fx: float, fy: float) -> None:
    page.mouse.click(*at(page, fx, fy))


def persisted(page: Any, web_server: WebServer, slug: str) -> list[dict[str, Any]]:
    """The page's labels equal the API's, and again after a reload."""
    saved(page)
    state = editor(page)
    served = api_state(web_server, slug, state["key"])
    assert served["labels"] == state["labels"] and served["revision"] == state["revision"]
    page.reload()
    loaded(page)
    saved(page)
    assert editor(page)["labels"] == state["labels"]
    return state["labels"]


@pytest.fixture
def alice_page(page: Any, datasets: WebServer) -> Any:
    return signed_in(page, datasets.user("alice"), "/datasets/alice/boxes")


def test_box_class_change_undo_redo_and_reload(alice_page: Any, datasets: WebServer) -> None:
    page = alice_page
    page.locator("#annotate-link").click()
    page.wait_for_url("**/annotate/*")
    loaded(page)
    saved(page)
    before = editor(page)["labels"]
    drag(page, (0.05, 0.05), (0.3, 0.25))
    saved(page)
    box = editor(page)["labels"][-1]
    assert box["classId"] == 0 and box["bbox"] == pytest.approx([0.175, 0.15, 0.25, 0.2], abs=0.02)
    page.keyboard.press("2")  # the new box is selected: class 2 is index 1
    saved(page)
    assert editor(page)["labels"][-1]["classId"] == 1
    revision = editor(page)["revision"]
    page.keyboard.press("Control+z")
    saved(page)
    assert editor(page)["labels"][-1]["classId"] == 0
    assert editor(page)["revision"] == revision + 1  # undoing a saved change saves the earlier state
    page.keyboard.press("Control+Shift+z")
    saved(page)
    assert editor(page)["labels"] == [*before, {**box, "classId": 1}]
    screenshot(page, "annotate")
    assert persisted(page, datasets, "boxes") == [*before, {**box, "classId": 1}]
    assert api_state(datasets, "boxes", editor(page)["key"])["labelledBy"] == "user:alice"


def test_polygon_with_a_vertex_deleted(alice_page: Any, datasets: WebServer) -> None:
    page = alice_page
    open_editor(page, "shapes-seg")
    for fx, fy in ((0.1, 0.1), (0.4, 0.1), (0.45, 0.3), (0.1, 0.4)):
        click(page, fx, fy)
    page.keyboard.press("Enter")
    saved(page)
    polygon = editor(page)["labels"][-1]
    assert len(polygon["segments"]) == 8 and polygon["segments"][:2] == pytest.approx([0.1, 0.1], abs=0.02)
    page.locator("#an-handles circle[data-vertex='2']").click()  # select the third vertex, delete it
    page.keyboard.press("Delete")
    saved(page)
    assert len(editor(page)["labels"][-1]["segments"]) == 6
    assert persisted(page, datasets, "shapes-seg")[-1]["segments"] == editor(page)["labels"][-1]["segments"]


def test_keypoints_with_one_skipped(alice_page: Any, datasets: WebServer) -> None:
    page = alice_page
    open_editor(page, "people")
    drag(page, (0.5, 0.5), (0.9, 0.9))
    click(page, 0.6, 0.6)
    page.keyboard.press("s")  # the second point is not visible
    click(page, 0.8, 0.85)
    saved(page)
    person = editor(page)["labels"][-1]
    assert person["keypoints"][2::3] == [2, 0, 2] and person["keypoints"][3:5] == [0, 0]
    assert person["keypoints"][:2] == pytest.approx([0.6, 0.6], abs=0.02)
    assert page.locator("#an-labels line.an-bone").count() >= 2  # the imported people's skeletons
    assert persisted(page, datasets, "people")[-1] == person


def test_shortcuts_dialog_opens_at_its_top(alice_page: Any, datasets: WebServer) -> None:
    """On a screen shorter than the list the dialog scrolls; opened by its button or by ``?`` (also after the
    page was scrolled) it shows its title, not its Close button: showModal() scrolled to the first focusable
    element, which was Close, under the table (issue 27)."""
    page = alice_page
    page.set_viewport_size({"width": 1024, "height": 600})
    open_editor(page, "boxes")
    dialog, title = page.locator("#an-help"), page.locator("#an-help-title")

    def by_key() -> None:
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        page.locator("#an-stage").focus()
        page.keyboard.press("?")

    for open_it in (lambda: page.get_by_role("button", name="Shortcuts").click(), by_key):
        open_it()
        expect(dialog).to_be_visible()
        assert dialog.evaluate("d => d.scrollHeight > d.clientHeight + 100")  # it has to scroll at this size
        assert dialog.evaluate("d => d.scrollTop") == 0
        expect(title).to_be_in_viewport(ratio=1)
        expect(title).to_be_focused()
        page.keyboard.press("Tab")  # the heading is not in the Tab order: Close is next
        expect(dialog.get_by_role("button", name="Close")).to_be_focused()
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()


def test_offline_edits_are_kept_and_saved_once(browser: Any, datasets: WebServer) -> None:
    context, recorder = new_context(browser, datasets)
    page = signed_in(context.new_page(), datasets.user("alice"), "/datasets/alice/boxes")
    start = open_editor(page, "boxes")
    key, revision = start["key"], start["revision"]
    reached: list[str] = []  # editIds of the saves that reached the server
    state = {"offline": True, "lost": 0}

    def flaky(route: Any) -> None:
        if route.request.method != "PUT" or not state["offline"]:
            if route.request.method == "PUT":
                reached.append(json.loads(route.request.post_data)["editId"])
            route.continue_()
        elif state["lost"] == 0:  # the first save reaches the server, its answer is lost
            state["lost"] += 1
            reached.append(json.loads(route.request.post_data)["editId"])
            route.fetch()
            route.abort()
        else:
            route.abort()

    page.route("**/api/datasets/*/*/annotate/*", flaky)
    drag(page, (0.05, 0.6), (0.2, 0.8))
    expect(page.locator("#an-status")).to_have_attribute("data-state", "unsaved")
    drag(page, (0.6, 0.05), (0.8, 0.2))
    typed = editor(page)["labels"]
    page.reload()  # still offline: what was typed comes back from the browser's queue
    loaded(page)
    assert editor(page)["labels"] == typed
    expect(page.locator("#an-status")).to_have_attribute("data-state", "unsaved")
    state["offline"] = False
    page.evaluate("window.dispatchEvent(new Event('online'))")
    saved(page)
    served = api_state(datasets, "boxes", key)
    assert served["labels"] == typed
    assert served["revision"] - revision == len(set(reached))  # each save applied once, retries not again
    assert page.evaluate("Object.keys(localStorage).filter(k => k.startsWith('lanner.annotate.')).length") == 0
    context.close()
    offline = "Failed to load resource: net::ERR_FAILED"  # the saves this test failed on purpose
    assert offline in recorder.errors
    recorder.errors = [e for e in recorder.errors if e != offline]
    check_recorder(recorder)


def test_two_pages_editing_one_image_get_a_conflict(browser: Any, alice_page: Any, datasets: WebServer) -> None:
    first = alice_page
    key = open_editor(first, "boxes")["key"]
    context, recorder = new_context(browser, datasets)
    try:
        second = signed_in(context.new_page(), datasets.user("alice"), f"/datasets/alice/boxes/annotate/{key}")
        loaded(second)
        saved(second)
        drag(first, (0.1, 0.1), (0.3, 0.3))
        saved(first)
        drag(second, (0.6, 0.6), (0.9, 0.9))
        dialog = second.locator("#an-conflict")
        expect(dialog).to_be_visible()
        expect(second.locator("#an-conflict-message")).to_contain_text("changed this image since you opened it")
        expect(second.locator("#an-status")).to_have_attribute("data-state", "conflict")
        mine = editor(second)["labels"]
        second.get_by_role("button", name="Overwrite with mine").click()
        saved(second)
        assert api_state(datasets, "boxes", key)["labels"] == mine
        drag(first, (0.4, 0.1), (0.5, 0.2))  # the first page is behind now: it gets the dialog too
        expect(first.locator("#an-conflict")).to_be_visible()
        first.get_by_role("button", name="Keep theirs").click()
        saved(first)
        assert editor(first)["labels"] == mine == api_state(datasets, "boxes", key)["labels"]
        context.close()
    finally:
        check_recorder(recorder)
