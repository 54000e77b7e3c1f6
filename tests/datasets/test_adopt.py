"""``datasets.adopt_images``: images of other datasets added by reference. Without ``release`` or
``classMapping`` they come unlabelled to train; with them, images of a dataset the caller may change keep their
labels (classes matched by name, renamed by ``classMapping``, new names appended) and split, and ``release``
moves them out of their source; a dataset the caller may only read gives unlabelled images and is never
changed; one they may not read is a 404; the same bytes are never adopted twice and a taken name is kept apart;
clones and versions of the source and the target do not change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lanner.datasets.models import Dataset
from lanner.synthetic import CLASSES
from tests.datasets.helpers import import_local, list_images
from tests.sdk_types import assert_sdk_type


def _retrieve(client: Any, who: Any, address: str) -> dict[str, Any]:
    body = client.get(f"/api/datasets/{address}", headers=who.headers).json()
    return body.get("dataset", body)


def _adopt(client: Any, who: Any, address: str, ids: list[str], **options: Any) -> Any:
    return client.post(f"/api/datasets/{address}/images/adopt", json={"imageIds": ids, **options},
                       headers=who.headers)


def test_adopting_images_copies_or_moves_them_with_or_without_labels(app: Any, client: Any, make_account: Any,
                                                                      tmp_path: Path) -> None:
    alice = make_account("alice")
    import_local(app, tmp_path, "alice", "source", seed=1)
    import_local(app, tmp_path, "alice", "other", seed=2)
    client.post("/api/datasets", json={"name": "plain"}, headers=alice.headers).raise_for_status()
    import_local(app, tmp_path, "alice", "target", seed=3, classes=[CLASSES[1]])  # its only class: the source's 1
    source = list_images(client, alice, "alice/source")
    ids = [image["id"] for image in source]

    plain = _adopt(client, alice, "alice/plain", ids)
    assert plain.status_code == 200, plain.text
    assert_sdk_type(plain.json(), "DatasetsAdoptImagesResponse")
    assert plain.json() == {"adopted": 5}
    adopted = list_images(client, alice, "alice/plain")
    assert {i["split"] for i in adopted} == {"train"} and all(not i.get("labels") for i in adopted)
    assert _adopt(client, alice, "alice/plain", ids).json() == {"adopted": 0}  # the same bytes: skipped

    copied = _adopt(client, alice, "alice/target", ids, release=False)
    assert copied.json() == {"adopted": 5}
    names = _retrieve(client, alice, "alice/target")["classNames"]
    assert names[0] == CLASSES[1] and len(names) == len(set(names))  # the target's own class keeps its id
    by_hash = {i["hash"]: i for i in list_images(client, alice, "alice/target")}
    for image in source:  # same split, same boxes, classes by name; a taken name got the source's key appended
        mine = by_hash[image["hash"]]
        assert mine["split"] == image["split"], image["name"]
        assert mine["name"] == image["name"] or mine["name"].startswith(image["name"].rsplit(".", 1)[0] + "-")
        assert [(names[label["classId"]], label["bbox"]) for label in mine["labels"]] == [
            (CLASSES[label["classId"]], label["bbox"]) for label in image["labels"]]
    assert len(list_images(client, alice, "alice/source")) == 5  # a copy leaves the source as it was

    other = list_images(client, alice, "alice/other")
    cloned = client.post("/api/datasets/alice/other/clone", json={"name": "other copy"}, headers=alice.headers)
    assert cloned.status_code == 201, cloned.text
    moved = _adopt(client, alice, "alice/target", [i["id"] for i in other[:2]], release=True,
                   classMapping={CLASSES[0]: CLASSES[1]})
    assert moved.json() == {"adopted": 2}
    assert len(list_images(client, alice, "alice/other")) == 3  # moved out of their source
    target_names = _retrieve(client, alice, "alice/target")["classNames"]
    by_hash = {i["hash"]: i for i in list_images(client, alice, "alice/target")}
    for original in other[:2]:
        expected = [CLASSES[1] if CLASSES[label["classId"]] == CLASSES[0] else CLASSES[label["classId"]]
                    for label in original["labels"]]
        assert [target_names[label["classId"]] for label in by_hash[original["hash"]]["labels"]] == expected
    names_in_train = [i["name"] for i in list_images(client, alice, "alice/target") if i["split"] == "train"]
    assert len(names_in_train) == len(set(names_in_train))  # a taken name was kept apart, never overwritten

    assert _retrieve(client, alice, "alice/source")["imageCount"] == 5
    assert len(list_images(client, alice, f"alice/{cloned.json()['dataset']}")) == 5  # the clone kept what moved


def test_other_peoples_datasets_give_unlabelled_copies_or_nothing(app: Any, client: Any, make_account: Any,
                                                                   tmp_path: Path) -> None:
    alice, bob = make_account("alice"), make_account("bob")
    import_local(app, tmp_path, "bob", "open", seed=4, visibility="public")
    import_local(app, tmp_path, "bob", "closed", seed=5)
    client.post("/api/datasets", json={"name": "mine"}, headers=alice.headers).raise_for_status()
    public_ids = [i["id"] for i in list_images(client, bob, "bob/open")]
    private_ids = [i["id"] for i in list_images(client, bob, "bob/closed")]

    taken = _adopt(client, alice, "alice/mine", public_ids, release=True)  # readable only: unlabelled, not moved
    assert taken.json() == {"adopted": 5}
    assert all(not i.get("labels") and i["split"] == "train" for i in list_images(client, alice, "alice/mine"))
    assert len(list_images(client, bob, "bob/open")) == 5
    refused = _adopt(client, alice, "alice/mine", private_ids)
    assert refused.status_code == 404 and "error" in refused.json()
    assert _adopt(client, bob, "alice/mine", public_ids).status_code == 404  # not his to change
    assert _adopt(client, alice, "alice/mine", []).status_code in (400, 422)
    assert _adopt(client, alice, "alice/mine", ["no-such-image"]).status_code == 404


def test_labels_of_another_task_are_refused_but_the_images_can_still_come(app: Any, client: Any,
                                                                          make_account: Any,
                                                                          tmp_path: Path) -> None:
    alice = make_account("alice")
    import_local(app, tmp_path, "alice", "boxes", seed=6)
    import_local(app, tmp_path, "alice", "rotated", seed=7)
    with app.state.lanner.db.session() as session:  # its labels are now another task's
        session.query(Dataset).filter_by(slug="rotated").one().task = "obb"
    ids = [i["id"] for i in list_images(client, alice, "alice/rotated")]
    refused = _adopt(client, alice, "alice/boxes", ids, release=False)
    assert refused.status_code == 400 and "obb labels" in refused.json()["error"]
    assert _retrieve(client, alice, "alice/boxes")["imageCount"] == 5  # nothing came
    assert _adopt(client, alice, "alice/boxes", ids).json() == {"adopted": 5}  # unlabelled: any task
    client.post("/api/datasets", json={"name": "empty"}, headers=alice.headers).raise_for_status()
    assert _adopt(client, alice, "alice/empty", ids, release=False).json() == {"adopted": 5}
    assert _retrieve(client, alice, "alice/empty")["task"] == "obb"  # an empty dataset takes their task
