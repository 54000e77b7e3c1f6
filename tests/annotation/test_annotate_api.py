"""The annotate API: revisions and conflicts, retried edits, who labelled, validation, tenancy, and that every
reader of the dataset (class stats, versions, export, clones) sees a save at once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import update

from lanner.datasets import service as datasets_service
from lanner.datasets.models import DatasetItem
from tests.web.pages import sign_in

BOX = {"classId": 1, "bbox": [0.5, 0.5, 0.2, 0.2]}


def test_a_save_bumps_the_revision_and_a_stale_save_is_a_409_with_the_current_state(shapes) -> None:
    key = shapes.keys()[0]
    opened = shapes.open(key)
    assert opened["revision"] == 0 and opened["labelledBy"] == "import" and opened["labels"]
    assert opened["task"] == "detect" and opened["classNames"] == ["circle", "square"]
    assert opened["image"]["key"] == key and opened["image"]["width"] == 64 and opened["image"]["url"]
    assert shapes.client.get(opened["image"]["url"]).status_code == 200
    saved = shapes.save(key, [BOX], 0, "edit-1")
    assert saved.status_code == 200, saved.text
    body = saved.json()
    assert body["labels"] == [BOX] and body["revision"] == 1 and body["labelledBy"] == "user:alice"
    assert body["labelledAt"]
    stale = shapes.save(key, [], 0, "edit-2")  # a second editor who opened revision 0
    assert stale.status_code == 409
    assert stale.json()["error"] == "alice changed this image since you opened it"
    assert stale.json()["current"] == body
    assert shapes.open(key)["labels"] == [BOX]


def test_a_retried_edit_is_applied_once(shapes) -> None:
    key = shapes.keys()[0]
    first = shapes.save(key, [BOX], 0, "edit-a")
    again = shapes.save(key, [BOX], 0, "edit-a")  # the answer was lost; the browser sends it again
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.json()["revision"] == 1
    following = shapes.save(key, [], 1, "edit-b")
    assert following.json()["revision"] == 2 and following.json()["labels"] == []


def test_the_sdk_update_bumps_the_revision_and_class_renumbering_too(shapes) -> None:
    key = shapes.keys()[0]
    image_id = f"{shapes.platform.datasets.retrieve('alice', 'shapes')['dataset']['id']}-{key}"
    shapes.platform.images.update(image_id, body={"labels": [BOX]})
    opened = shapes.open(key)
    assert opened["revision"] == 1 and opened["labelledBy"] == "user:alice" and opened["labels"] == [BOX]
    assert shapes.save(key, [], 0, "late").status_code == 409
    shapes.platform.datasets.merge_classes("alice", "shapes", source_class_ids=[1], target_class_id=0)
    renumbered = shapes.open(key)
    assert renumbered["revision"] == 2 and renumbered["labels"] == [{**BOX, "classId": 0}]
    assert renumbered["labelledBy"] == "user:alice"


def test_invalid_labels_are_400s_naming_the_label(shapes) -> None:
    key = shapes.keys()[0]
    cases = [([BOX, {"classId": 0, "bbox": [0.5, 0.5, 0.1]}], "labels[1].bbox"),
             ([{"classId": 5, "bbox": [0.5, 0.5, 0.1, 0.1]}], "labels[0].classId"),
             ([{"classId": 0, "bbox": [0.5, 0.5, 3, 0.1]}], "labels[0].bbox"),
             ([{"classId": 0}], "labels[0]")]
    for labels, named in cases:
        response = shapes.save(key, labels, 0, "bad")
        assert response.status_code == 400 and named in response.json()["error"], response.text
    assert shapes.save(key, [BOX], 0, "x", classId=1).status_code == 400  # classId is for classify
    assert shapes.client.put(shapes.url(f"/annotate/{key}"), headers=shapes.headers,
                             json={"labels": [], "revision": -1, "editId": "x"}).status_code == 422
    assert shapes.open(key)["revision"] == 0
    assert shapes.client.get(shapes.url("/annotate/nope"), headers=shapes.headers).status_code == 404
    assert shapes.client.get(shapes.url(f"/annotate/{key}"), params={"filter": "odd"},
                             headers=shapes.headers).status_code == 400


def test_another_users_dataset_is_answered_like_a_missing_one(shapes, bob) -> None:
    key = shapes.keys()[0]
    save = {"labels": [], "revision": 0, "editId": "bob"}
    routes = [("GET", f"/annotate/{key}", None), ("PUT", f"/annotate/{key}", save), ("GET", "/proposal-models", None),
              ("POST", "/proposals", {"model": "alice/p/m", "keys": [key]}), ("GET", "/proposals/acceptance", None)]
    for visibility in ("private", "public"):
        shapes.platform.datasets.update("alice", "shapes", visibility=visibility)
        for method, path, body in routes:
            theirs = shapes.client.request(method, shapes.url(path), json=body, headers=bob.headers)
            missing = shapes.client.request(method, shapes.url(path, "missing"), json=body, headers=bob.headers)
            assert theirs.status_code == missing.status_code == 404, (visibility, method, path, theirs.text)
            assert theirs.json() == {**missing.json(), "error": missing.json()["error"].replace("missing", "shapes")}
    assert shapes.open(key)["revision"] == 0


def test_neighbours_follow_the_grid_order_and_the_unlabelled_filter(shapes, app) -> None:
    keys = shapes.keys()
    first, middle, last = shapes.open(keys[0]), shapes.open(keys[1]), shapes.open(keys[-1])
    assert first["neighbours"] == {"previous": None, "next": keys[1]}
    assert middle["neighbours"] == {"previous": keys[0], "next": keys[2]}
    assert last["neighbours"] == {"previous": keys[-2], "next": None}
    with app.state.lanner.db.session() as session:  # two images without a label file, as a plain-image import
        session.execute(update(DatasetItem).where(DatasetItem.key.in_([keys[2], keys[4]]))
                        .values(labels=None, label_count=0, class_list=",", class_mask=0))
        session.commit()
    assert shapes.open(keys[0], filter="unlabelled")["neighbours"] == {"previous": None, "next": keys[2]}
    assert shapes.open(keys[2], filter="unlabelled")["neighbours"] == {"previous": None, "next": keys[4]}


def test_class_stats_versions_and_the_export_see_a_save_at_once(shapes) -> None:
    platform, key = shapes.platform, shapes.keys()[0]
    before = {c["classId"]: c["count"] for c in platform.datasets.class_stats("alice", "shapes")["classes"]}
    old = shapes.open(key)["labels"]
    three = [{"classId": 1, "bbox": [0.2 + 0.2 * i, 0.5, 0.1, 0.1]} for i in range(3)]
    assert shapes.save(key, three, 0, "e").status_code == 200
    after = {c["classId"]: c["count"] for c in platform.datasets.class_stats("alice", "shapes")["classes"]}
    removed = {c: sum(1 for lbl in old if lbl["classId"] == c) for c in (0, 1)}
    assert after[0] == before[0] - removed[0] and after[1] == before[1] - removed[1] + 3
    version = platform.datasets.create_export("alice", "shapes")["version"]
    name = shapes.open(key)["image"]["name"]
    for params in ({"v": version}, {}):
        url = platform.datasets.export("alice", "shapes", **params)["downloadUrl"]
        records = [json.loads(line) for line in shapes.client.get(url).text.splitlines()[1:]]
        boxes = next(r for r in records if r["file"] == name)["annotations"]["boxes"]
        assert len(boxes) == 3 and all(b[0] == 1 for b in boxes), (params, boxes)


def test_a_clones_edit_leaves_the_original_unchanged(shapes) -> None:
    key = shapes.keys()[0]
    assert shapes.save(key, [BOX], 0, "before-clone").status_code == 200
    shapes.platform.datasets.clone("alice", "shapes", name="copy")
    copied = shapes.open(key, slug="copy")
    assert copied["revision"] == 1 and copied["labelledBy"] == "user:alice" and copied["labels"] == [BOX]
    assert shapes.save(key, [], 1, "before-clone", slug="copy").json()["revision"] == 1  # the id came along
    changed = shapes.save(key, [], 1, "in-clone", slug="copy")
    assert changed.status_code == 200 and changed.json()["revision"] == 2
    original = shapes.open(key)
    assert original["labels"] == [BOX] and original["revision"] == 1
    assert shapes.open(key, slug="copy")["labels"] == []


def test_two_saves_from_one_revision_cannot_both_win(shapes, settings, monkeypatch) -> None:
    """The other save commits between this save's revision check and its write: the guarded UPDATE finds the
    revision taken and answers 409. (SQLite takes its write lock when a transaction begins, so there the two
    cannot interleave at all: this is PostgreSQL's case.)"""
    if settings.database_url.startswith("sqlite"):
        pytest.skip("SQLite serializes writers (BEGIN IMMEDIATE): the saves cannot interleave")
    key = shapes.keys()[0]
    real = datasets_service.writable_manifest

    def racing(session: Any, dataset: Any) -> int:
        monkeypatch.setattr(datasets_service, "writable_manifest", real)
        assert shapes.save(key, [BOX], 0, "the-other-editor").status_code == 200  # its own request, committed
        return real(session, dataset)

    monkeypatch.setattr(datasets_service, "writable_manifest", racing)
    response = shapes.save(key, [], 0, "mine")
    assert response.status_code == 409, response.text
    assert response.json()["current"]["revision"] == 1 and response.json()["current"]["labels"] == [BOX]
    assert shapes.open(key)["labels"] == [BOX]


def test_the_editor_page_saves_with_its_session_cookie_and_csrf_token(shapes) -> None:
    """What the browser editor does: no API key, the session cookie, and the page's token on writes."""
    key, client = shapes.keys()[0], shapes.client
    token = sign_in(client)
    opened = client.get(shapes.url(f"/annotate/{key}"))
    assert opened.status_code == 200 and opened.json()["revision"] == 0
    body = {"labels": [BOX], "revision": 0, "editId": "from-the-page"}
    assert client.put(shapes.url(f"/annotate/{key}"), json=body).status_code == 403  # no token: refused
    saved = client.put(shapes.url(f"/annotate/{key}"), json=body, headers={"X-CSRFToken": token})
    assert saved.status_code == 200 and saved.json()["labelledBy"] == "user:alice"
