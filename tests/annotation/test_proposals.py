"""Proposals from a real model (the tiny shapes detector) on dataset images: which models are offered, class
mapping by name with the mismatches listed, and the acceptance counts a save records."""

from __future__ import annotations

from typing import Any

from lanner.projects.models import ModelRecord
from tests.annotation.conftest import attach


def _detector(app: Any, account: Any, weights: Any, **kwargs: Any) -> str:
    """The detector as a model of ``account``, trained (per its record) at 64 px like its images."""
    model_id = attach(app, account, weights, **kwargs)
    with app.state.lanner.db.session() as session:
        session.get(ModelRecord, model_id).train_args = {"imgsz": 64}
        session.commit()
    return model_id


def _propose(shapes: Any, keys: list[str], slug: str | None = None, model: str = "alice/shapes/tiny") -> Any:
    return shapes.client.post(shapes.url("/proposals", slug), headers=shapes.headers,
                              json={"model": model, "keys": keys, "conf": 0.01})


def test_models_on_offer_fit_the_task_and_the_readers_access(shapes, app, alice, bob, shapes_detector) -> None:
    model_id = _detector(app, alice, shapes_detector)
    attach(app, alice, shapes_detector, project="masks", model="seg", task="segment")
    attach(app, bob, shapes_detector, project="open", model="shared", visibility="public")
    attach(app, bob, shapes_detector, project="closed", model="secret")
    shapes.name_classes(["Square", "triangle"])
    offered = shapes.client.get(shapes.url("/proposal-models"), headers=shapes.headers).json()["models"]
    assert [m["ref"] for m in offered] == ["alice/shapes/tiny", "bob/open/shared"]
    assert offered[0] == {"id": model_id, "ref": "alice/shapes/tiny", "name": "tiny", "task": "detect",
                          "classNames": ["circle", "square"], "matched": 1, "unmatched": ["circle"]}
    key = shapes.keys()[0]
    assert _propose(shapes, [key], model="bob/closed/secret").status_code == 404
    assert _propose(shapes, [key], model="alice/masks/seg").status_code == 422  # a segment model, detect data
    assert _propose(shapes, ["nope"]).status_code == 404
    assert shapes.client.post(shapes.url("/proposals"), headers=shapes.headers,
                              json={"model": "alice/shapes/tiny", "keys": [key] * 51}).status_code == 422


def test_proposals_map_classes_by_name_and_list_the_rest(shapes, app, alice, shapes_detector) -> None:
    model_id = _detector(app, alice, shapes_detector)
    shapes.platform.datasets.clone("alice", "shapes", name="renamed")
    shapes.name_classes(["triangle", "box", "SQUARE"], "renamed")  # the shapes' classes, renamed and one added
    keys = shapes.keys()
    same = _propose(shapes, keys)
    assert same.status_code == 200, same.text
    assert same.json()["mapping"] == {"circle": 0, "square": 1} and same.json()["unmatched"] == []
    by_id = _propose(shapes, keys, slug="renamed", model=model_id)
    assert by_id.status_code == 200, by_id.text
    body = by_id.json()
    assert body["mapping"] == {"circle": None, "square": 2} and body["unmatched"] == ["circle"]
    assert body["model"]["ref"] == "alice/shapes/tiny" and body["model"]["unmatched"] == ["circle"]
    original = same.json()["images"]
    assert sum(len(v) for v in original.values()) > 0
    for key in keys:  # squares become class 2, circles are dropped (the tiny detector sees mostly squares)
        expected = [{**p, "classId": 2} for p in original[key] if p["classId"] == 1]
        assert body["images"][key] == expected
        assert all(0.01 <= p["confidence"] <= 1 and len(p["bbox"]) == 4 for p in original[key])


def test_a_save_counts_the_proposals_accepted_unchanged(shapes, app, alice, shapes_detector) -> None:
    model_id = _detector(app, alice, shapes_detector)
    proposed = _propose(shapes, shapes.keys()).json()["images"]
    busy = [k for k, v in proposed.items() if len(v) >= 2]
    assert len(busy) >= 2, proposed
    first, second = busy[:2]
    _propose(shapes, [first, second])  # the editor opened them again: counted once
    as_proposed = [{k: v for k, v in p.items() if k != "confidence"} for p in proposed[first]]
    saved = shapes.save(first, as_proposed, 0, "accept-all").json()
    assert saved["labelledBy"] == "model:alice/shapes/tiny" and saved["revision"] == 1
    labels = [{k: v for k, v in p.items() if k != "confidence"} for p in proposed[second]]
    moved = {**labels[0], "bbox": [min(1.0, labels[0]["bbox"][0] + 0.05), *labels[0]["bbox"][1:]]}
    edited = [moved, *labels[1:], {"classId": 0, "bbox": [0.5, 0.5, 0.1, 0.1]}]
    assert shapes.save(second, edited, 0, "edit-some").json()["labelledBy"] == "user:alice"
    shown = len(proposed[first]) + len(proposed[second])
    counts = shapes.client.get(shapes.url("/proposals/acceptance"), headers=shapes.headers).json()
    assert counts == {"shown": shown, "acceptedUnchanged": shown - 1}
    only = shapes.client.get(shapes.url("/proposals/acceptance"), params={"modelId": model_id},
                             headers=shapes.headers).json()
    assert only == counts
    assert shapes.client.get(shapes.url("/proposals/acceptance"), params={"modelId": "other"},
                             headers=shapes.headers).json() == {"shown": 0, "acceptedUnchanged": 0}


def test_proposals_accepted_one_save_at_a_time_all_count(shapes, app, alice, shapes_detector) -> None:
    """The editor saves every change, so proposals accepted one by one are one save each: each later save of the
    image counts the model's proposals again, until the model proposes for the image again."""
    _detector(app, alice, shapes_detector)
    proposed = _propose(shapes, shapes.keys()).json()["images"]
    key = next(k for k, v in proposed.items() if len(v) >= 2)
    labels = [{k: v for k, v in p.items() if k != "confidence"} for p in proposed[key]]

    def counts() -> dict[str, int]:
        return shapes.client.get(shapes.url("/proposals/acceptance"), headers=shapes.headers).json()

    assert shapes.save(key, labels[:1], 0, "accept-one").json()["labelledBy"] == "user:alice"
    assert counts() == {"shown": len(labels), "acceptedUnchanged": 1}
    assert shapes.save(key, labels, 1, "accept-rest").json()["labelledBy"] == "model:alice/shapes/tiny"
    assert counts() == {"shown": len(labels), "acceptedUnchanged": len(labels)}
    _propose(shapes, [key])  # proposed again: a new record, and the first one keeps its counts
    assert shapes.save(key, [], 2, "clear").json()["labelledBy"] == "user:alice"
    assert counts() == {"shown": 2 * len(labels), "acceptedUnchanged": len(labels)}
