"""The label editor's model proposals, rotated boxes and image classes in a real browser against a real server.

- Proposals: a detector with real weights is a model of the workspace, picked in the editor's model picker;
  "Propose labels" draws its boxes dashed with their confidence, the slider hides the low ones without asking
  the server again, one is accepted, one rejected, the rest accepted with A; the API then holds exactly the
  accepted proposals, names the model as the labeller when its whole set was kept unchanged, and counts what was
  accepted. The detector is ``localizer_weights`` (one class, ``shape``, well trained: several boxes per image
  with different scores); the tiny ``shapes_detector`` (circle, square; one whole-image box per image) is the
  model whose classes the dataset does not have.
- Rotated boxes on an OBB dataset: drawn, turned by the round handle and by ``]``, and the API's eight numbers
  are the corners the page draws, again after a reload.
- Classify: the image's class set by its number key, undone, redone, and persisted; a classifier's proposal
  (a random-init one, ``build_task_model``) accepted with A becomes the image's class.

Fails on any browser error (see ``conftest.page``)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.synthetic import CLASSES, make_detection_dataset
from tests.deployments.test_e2e_local import server_context
from tests.inference.conftest import build_task_model, shapes_detector  # noqa: F401  (a fixture)
from tests.trained import attach_weights
from tests.web.conftest import WebServer, screenshot, signed_in
from tests.web.test_annotate_browser import api_state, at, drag, editor, open_editor, persisted, saved

pytestmark = pytest.mark.browser
MODEL = "alice/shapes/localizer"
OTHER = "alice/shapes/tiny"
LOW = 0.05  # the slider's minimum


def obb_dataset(folder: Path) -> Path:
    """The synthetic shapes with each box written as its four corners (the importer infers ``obb``)."""
    data = make_detection_dataset(folder, train=2, val=1, size=96, seed=4)
    for path in (folder / "labels").rglob("*.txt"):
        rows = []
        for line in path.read_text().splitlines():
            c, cx, cy, w, h = (float(v) for v in line.split())
            x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
            rows.append(f"{int(c)} {x0:.4f} {y0:.4f} {x1:.4f} {y0:.4f} {x1:.4f} {y1:.4f} {x0:.4f} {y1:.4f}")
        path.write_text("\n".join(rows) + "\n")
    return data.parent


def class_folders(source: Path, dest: Path) -> Path:
    """A classify dataset as class folders (``train/circle/*.jpg``): each synthetic image in its first shape's
    class."""
    make_detection_dataset(source, train=4, val=2, size=64, seed=6)
    for label in (source / "labels").rglob("*.txt"):
        split, name = label.parent.name, label.stem + ".jpg"
        folder = dest / split / CLASSES[int(label.read_text().split()[0])]
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / "images" / split / name, folder / name)
    return dest


def shape_dataset(folder: Path) -> Path:
    """Unlabelled synthetic shapes whose one class is ``shape`` (the localizer's), at the localizer's 64 px."""
    data = make_detection_dataset(folder, train=6, val=2, size=64, seed=2)
    for path in (folder / "labels" / "train").glob("*.txt"):
        path.unlink()  # unlabelled: what proposals are for
    data.write_text(f"path: {folder}\ntrain: images/train\nval: images/val\nnames:\n  0: shape\n")
    for path in (folder / "labels" / "val").glob("*.txt"):
        path.write_text("".join(f"0 {line.split(maxsplit=1)[1]}\n" for line in path.read_text().splitlines()))
    return folder


@pytest.fixture(scope="module")
def workspace(web_server: WebServer, tmp_path_factory: pytest.TempPathFactory) -> WebServer:
    web_server.user("alice")
    folder = tmp_path_factory.mktemp("annotate-more")
    for name, source in (("raw", shape_dataset(folder / "raw")), ("tilted", obb_dataset(folder / "tilted")),
                         ("kinds", class_folders(folder / "cls-source", folder / "kinds"))):
        web_server.cli("datasets", "import", str(source), "--owner", "alice", "--name", name)
    return web_server


@pytest.fixture(scope="module")
def models(workspace: WebServer, localizer_weights: Path, shapes_detector: Path) -> WebServer:  # noqa: F811
    """alice's ``shapes/localizer`` and ``shapes/tiny``, with weights, as finished runs leave them."""
    from lanner.projects.models import ModelRecord

    app = server_context(workspace.server.home, workspace.url)
    try:
        for name, weights, names in (("localizer", localizer_weights, ["shape"]), ("tiny", shapes_detector, CLASSES)):
            model_id = attach_weights(app, workspace.user("alice"), weights, model=name)
            with app.state.lanner.db.session() as session:
                record = session.get(ModelRecord, model_id)
                record.train_args, record.class_names = {"imgsz": 64}, names  # both saw 64 px images
                session.commit()
    finally:
        app.state.lanner.db.dispose()
    return workspace


@pytest.fixture(scope="module")
def classifier(workspace: WebServer, tmp_path_factory: pytest.TempPathFactory) -> WebServer:
    """alice's ``shapes/classifier``: a random-init classify model of circle, square and triangle."""
    from lanner.projects.models import ModelRecord

    weights = build_task_model("classify", tmp_path_factory.mktemp("classifier") / "best.pt")
    app = server_context(workspace.server.home, workspace.url)
    try:
        model_id = attach_weights(app, workspace.user("alice"), weights, model="classifier")
        with app.state.lanner.db.session() as session:
            record = session.get(ModelRecord, model_id)
            record.task, record.class_names, record.train_args = "classify", [*CLASSES, "triangle"], {"imgsz": 64}
            session.commit()
    finally:
        app.state.lanner.db.dispose()
    return workspace


@pytest.fixture
def alice_page(page: Any, workspace: WebServer) -> Any:
    return signed_in(page, workspace.user("alice"), "/datasets/alice/raw")


def api(web_server: WebServer, method: str, path: str, **kwargs: Any) -> Any:
    response = web_server.api(web_server.user("alice"), method, f"/api/datasets/alice/{path}", **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


def unlabelled_keys(web_server: WebServer) -> list[str]:
    images = api(web_server, "GET", "raw/images", params={"hasLabel": "false", "includeThumbnails": "false"})
    return [image["id"].rpartition("-")[2] for image in images["images"]]


def pick_images(web_server: WebServer) -> tuple[str, float, str, str]:
    """An image with proposals enough to accept one, reject one, hide one by a slider step and accept the rest
    with A (and that step), another image with proposals, and a third one for the other model. Proposals only
    count once their image is saved, and the editor proposes again on each of them."""
    keys = unlabelled_keys(web_server)
    found = api(web_server, "POST", "raw/proposals", json={"model": MODEL, "keys": keys, "conf": LOW})["images"]
    for key in keys:
        scores = [p["confidence"] for p in found[key]]  # the first accepted, the second rejected, the rest
        for step in range(2, 20):  # the slider's steps above its minimum
            threshold = round(step * 0.05, 2)
            if sum(s >= threshold for s in scores[2:]) >= 1 and any(s < threshold for s in scores[2:]):
                others = [k for k in keys if k != key and found[k]]
                assert len(others) >= 2, found
                return key, threshold, others[0], others[1]
    raise AssertionError(f"no image has proposals to split with the slider: {found}")


def propose(page: Any) -> dict[str, Any]:
    """Click "Propose labels"; the API's answer, once the page lists its proposals."""
    with page.expect_response("**/proposals") as answer:
        page.get_by_role("button", name="Propose labels").click()
    body = answer.value.json()
    expect(page.locator("#an-prop-status")).to_contain_text("on this image")
    return body


def without_confidence(proposal: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in proposal.items() if k != "confidence"}


def test_proposals_accepted_rejected_filtered_and_counted(alice_page: Any, models: WebServer) -> None:
    page, workspace = alice_page, models
    busy, threshold, whole, other = pick_images(workspace)
    open_editor(page, "raw", busy)
    page.locator("#an-model").select_option(MODEL)
    expect(page.locator("#an-model-hint")).to_have_text("1 class matched")
    page.get_by_label("Confidence at least").fill(str(LOW))
    expect(page.locator("#an-conf-value")).to_have_text(f"{LOW:.2f}")
    proposed = propose(page)["images"][busy]
    expect(page.locator("#an-prop-list li")).to_have_count(len(proposed))
    drawn = page.locator("#an-proposals .an-proposal")
    expect(drawn).to_have_count(len(proposed))
    assert page.locator("#an-proposals text.an-conf").all_text_contents() == [
        f"{p['confidence']:.2f}" for p in proposed]
    assert drawn.first.evaluate("e => getComputedStyle(e).strokeDasharray") != "none"  # dashed, unlike labels
    screenshot(page, "annotate-proposals")

    page.locator("#an-prop-list li").first.get_by_role("button", name="Accept").click()
    saved(page)
    assert editor(page)["labels"] == [without_confidence(proposed[0])]
    assert page.locator("#an-labels .an-shape").first.evaluate("e => getComputedStyle(e).strokeDasharray") == "none"
    page.locator("#an-prop-list li").first.get_by_role("button", name="Reject").click()
    expect(page.locator("#an-prop-list li")).to_have_count(len(proposed) - 2)
    rest = [p for p in proposed[2:] if p["confidence"] >= threshold]
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.get_by_label("Confidence at least").fill(str(threshold))  # the slider filters in the page
    expect(page.locator("#an-prop-list li")).to_have_count(len(rest))
    expect(drawn).to_have_count(len(rest))
    assert not requests
    page.keyboard.press("Escape")  # out of the slider, back to the canvas
    page.keyboard.press("a")
    expect(page.locator("#an-prop-list li")).to_have_count(0)
    saved(page)
    accepted = [without_confidence(proposed[0]), *(without_confidence(p) for p in rest)]
    state = api_state(workspace, "raw", busy)
    assert state["labels"] == accepted == editor(page)["labels"]
    assert state["labelledBy"] == "user:alice"  # one rejected, some hidden: not the model's whole set
    counts = {"shown": len(proposed), "acceptedUnchanged": len(accepted)}
    assert api(workspace, "GET", "raw/proposals/acceptance") == counts

    open_editor(page, "raw", whole)  # the whole set, accepted unchanged with A: the model labelled it
    page.locator("#an-model").select_option(MODEL)
    page.get_by_label("Confidence at least").fill(str(LOW))
    all_of_them = [without_confidence(p) for p in propose(page)["images"][whole]]
    page.keyboard.press("Escape")
    page.keyboard.press("a")
    saved(page)
    state = api_state(workspace, "raw", whole)
    assert state["labels"] == all_of_them and state["labelledBy"] == f"model:{MODEL}"
    expect(page.locator("#an-image-facts")).to_contain_text(f"labelled by model:{MODEL}")
    counts = {"shown": counts["shown"] + len(all_of_them),
              "acceptedUnchanged": counts["acceptedUnchanged"] + len(all_of_them)}
    assert api(workspace, "GET", "raw/proposals/acceptance") == counts

    open_editor(page, "raw", other)  # a model whose classes the dataset does not have
    page.locator("#an-model").select_option(OTHER)
    expect(page.locator("#an-model-hint")).to_have_text("0 classes matched; not in this dataset: circle, square")
    page.get_by_label("Confidence at least").fill(str(LOW))
    answer = propose(page)
    assert answer["unmatched"] == CLASSES and answer["mapping"] == {"circle": None, "square": None}
    expect(page.locator("#an-prop-status")).to_have_text("0 proposals on this image; dropped classes: circle, square.")
    expect(page.locator("#an-prop-list li")).to_have_count(0)


def corners(page: Any) -> list[float]:
    """The rotated box the page draws (the last label's polygon, in image pixels) as fractions of the image."""
    return page.evaluate("""() => { const c = lannerEditor.canvas, shapes = document.querySelectorAll(
        '#an-labels polygon'), p = shapes[shapes.length - 1].getAttribute('points').split(' ');
        return p.flatMap(xy => xy.split(',').map(Number)).map((v, i) => v / (i % 2 ? c.H : c.W)); }""")


def angle(obb: list[float], width: int, height: int) -> float:
    return math.degrees(math.atan2((obb[3] - obb[1]) * height, (obb[2] - obb[0]) * width))


def test_rotated_box_turned_by_handle_and_keys_then_reloaded(alice_page: Any, workspace: WebServer) -> None:
    page = alice_page
    start = open_editor(page, "tilted")
    size = api_state(workspace, "tilted", start["key"])["image"]
    width, height = size["width"], size["height"]
    drag(page, (0.3, 0.35), (0.6, 0.55))
    saved(page)
    box = editor(page)["labels"][-1]
    assert box["obb"] == pytest.approx([0.3, 0.35, 0.6, 0.35, 0.6, 0.55, 0.3, 0.55], abs=0.02)
    knob = page.locator("#an-handles circle[data-rotate]").bounding_box()
    page.mouse.move(knob["x"] + knob["width"] / 2, knob["y"] + knob["height"] / 2)
    page.mouse.down()
    centre = ((box["obb"][0] + box["obb"][4]) / 2, (box["obb"][1] + box["obb"][5]) / 2)
    turn = math.radians(30)  # the handle pointed 30° clockwise from straight up
    page.mouse.move(*at(page, centre[0] + 0.2 * math.sin(turn) * height / width, centre[1] - 0.2 * math.cos(turn)),
                    steps=4)
    page.mouse.up()
    saved(page)
    assert angle(editor(page)["labels"][-1]["obb"], width, height) == pytest.approx(30, abs=1.5)
    for _ in range(5):
        page.keyboard.press("]")  # 1° each, one save each
    saved(page)
    turned = editor(page)["labels"][-1]["obb"]
    assert angle(turned, width, height) == pytest.approx(35, abs=1.5)
    sides = (math.hypot((turned[2] - turned[0]) * width, (turned[3] - turned[1]) * height),
             math.hypot((turned[4] - turned[2]) * width, (turned[5] - turned[3]) * height))
    assert sides == pytest.approx((0.3 * width, 0.2 * height), abs=0.03 * width)  # turned, not resized
    assert corners(page) == pytest.approx(turned, abs=0.2 / width)  # drawn to 0.1 px
    assert persisted(page, workspace, "tilted")[-1]["obb"] == turned
    assert api_state(workspace, "tilted", start["key"])["labels"][-1]["obb"] == turned
    assert corners(page) == pytest.approx(turned, abs=0.2 / width)


def test_image_class_by_number_key_undone_redone_and_reloaded(alice_page: Any, workspace: WebServer) -> None:
    page = alice_page
    start = open_editor(page, "kinds")
    before = api_state(workspace, "kinds", start["key"])
    assert before["task"] == "classify" and before["classNames"] == CLASSES and before["classId"] in (0, 1)
    other = 1 - before["classId"]
    page.keyboard.press(str(other + 1))  # class 1 is key 1
    saved(page)
    assert api_state(workspace, "kinds", start["key"])["classId"] == other
    expect(page.locator("#an-label-list")).to_have_text(f"Image class: {CLASSES[other]}")
    page.keyboard.press("Control+z")
    saved(page)
    assert api_state(workspace, "kinds", start["key"])["classId"] == before["classId"]
    expect(page.locator("#an-label-list")).to_have_text(f"Image class: {CLASSES[before['classId']]}")
    page.keyboard.press("Control+Shift+z")
    saved(page)
    page.reload()
    page.locator("#an-editor[data-loaded]").wait_for(state="attached")
    saved(page)
    expect(page.locator(f"#an-classes button[data-class-id='{other}']")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#an-label-list")).to_have_text(f"Image class: {CLASSES[other]}")
    state = api_state(workspace, "kinds", start["key"])
    assert (state["classId"], state["labels"], state["labelledBy"]) == (other, [], "user:alice")


def test_a_class_proposal_accepted_becomes_the_image_class(alice_page: Any, classifier: WebServer) -> None:
    page, model = alice_page, "alice/shapes/classifier"
    images = api(classifier, "GET", "kinds/images", params={"includeThumbnails": "false", "limit": 100})["images"]
    keys = [image["id"].rpartition("-")[2] for image in images]
    found = api(classifier, "POST", "kinds/proposals", json={"model": model, "keys": keys, "conf": LOW})["images"]
    key = next(k for k in reversed(keys) if found[k])  # the first image is the number-key test's
    open_editor(page, "kinds", key)
    page.locator("#an-model").select_option(model)
    expect(page.locator("#an-model-hint")).to_have_text("2 classes matched; not in this dataset: triangle")
    page.get_by_label("Confidence at least").fill(str(LOW))
    proposed = propose(page)["images"][key]
    assert len(proposed) == 1 and set(proposed[0]) == {"classId", "confidence"}
    expect(page.locator("#an-prop-list li")).to_have_text(
        f"{CLASSES[proposed[0]['classId']]} · {proposed[0]['confidence']:.2f}AcceptReject")
    expect(page.locator("#an-proposals > *")).to_have_count(0)  # a class has no shape to draw
    page.keyboard.press("Escape")
    page.keyboard.press("a")
    saved(page)
    expect(page.locator("#an-label-list")).to_have_text(f"Image class: {CLASSES[proposed[0]['classId']]}")
    state = api_state(classifier, "kinds", key)
    assert (state["classId"], state["labels"], state["labelledBy"]) == (proposed[0]["classId"], [], f"model:{model}")
