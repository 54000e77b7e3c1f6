"""``datasets.images`` (the SDK's image list) as issue 19 made it: the page found on the index and then joined,
totals remembered per dataset revision, issue codes counted each time, a page's links signed with one expiry,
and the body written by orjson. Items are written straight into the tables (no import worker), on SQLite and
PostgreSQL alike."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest
from sqlalchemy import update
from ultralytics_platform import APIError

from lanner.datasets import items, listing, service
from lanner.datasets.listing import SORTS
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.storage.signing import URLSigner
from tests.sdk_types import assert_sdk_type
from tests.web.pages import sign_in

COUNT = 23  # pages of 5 end on a short page


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def grid(app: Any, alice: Any, sdk: Any) -> dict[str, Any]:
    """alice/grid: COUNT images, every third in val, labels with classes 0-2 (none on every fifth), sizes that
    repeat so sorting by labels has ties; returns what each image was given, by name."""
    platform = sdk(alice)
    # Rows without image files: the import queue's health pass would flag every one (no file) and rewrite the
    # issue codes the tests set, so it is stopped (an import would start it again).
    app.state.imports.stop()
    created = platform.datasets.create(dataset="grid", name="grid", visibility="private",
                                       class_names=["a", "b", "c"])
    expected: dict[str, dict[str, Any]] = {}
    with app.state.lanner.db.session() as session:
        dataset = session.get(Dataset, created["id"])
        assert dataset is not None
        for i in range(COUNT):
            sha = _sha(f"grid-{i}")
            session.add(ImageBlob(sha256=sha, size=1000 + i, width=64 + i, height=48, format="jpeg", phash=i,
                                  thumb_sha256=_sha(f"thumb-{i}") if i % 7 else None))
            labels = None if i % 5 == 0 else [{"classId": (i + j) % 3, "bbox": [0.5, 0.5, 0.1, 0.1]}
                                              for j in range(i % 4)]
            name = f"img_{i:03d}.jpg"
            split = "val" if i % 3 == 0 else "train"
            session.flush()
            session.add(DatasetItem(manifest_id=dataset.manifest_id, key=f"k{(i * 7) % COUNT:02d}", name=name,
                                    split=split, sha256=sha, labels=labels, class_id=None, issues=",",
                                    **service.label_fields(labels, None)))
            expected[name] = {"split": split, "labels": labels, "id": f"{dataset.id}-k{(i * 7) % COUNT:02d}",
                              "width": 64 + i, "height": 48, "size": 1000 + i}
        service.touch(dataset)
    return {"platform": platform, "id": created["id"], "expected": expected}


def _walk(platform: Any, **filters: Any) -> tuple[list[str], list[int]]:
    """Every page by nextCursor (5 a page): the names in order and the totals each page said."""
    names, totals, cursor = [], [], None
    while True:
        page = platform.datasets.images("alice", "grid", limit=5, **filters,
                                        **({"cursor": cursor} if cursor else {}))
        assert_sdk_type(page, "DatasetsImagesResponse")
        names += [i["name"] for i in page["images"]]
        totals.append(page["total"])
        assert page["hasMore"] is ("nextCursor" in page)
        if not page["hasMore"]:
            return names, totals
        cursor = page["nextCursor"]


def _order(expected: dict[str, dict[str, Any]], sort: str) -> list[str]:
    """The names in ``sort``'s order as the listing defines it: the column, then the key (ascending). Sorts are
    the SDK's (``width-desc``) or the short ones (``-labels``)."""
    short = {"name": "name-asc", "-name": "name-desc", "labels": "labels-asc", "-labels": "labels-desc"}
    field, _, way = short.get(sort, sort).partition("-")

    def key(name: str) -> tuple[Any, str]:
        image, number = expected[name], int(name[4:7])
        value = {"labels": len(image["labels"] or []), "newest": -number, "oldest": number, "name": name}.get(
            field, image.get(field))
        if way == "desc" and field != "name":
            value = -value
        return value, image["id"].rsplit("-", 1)[1]

    # names are unique: for them the key never decides, and the whole order can be reversed
    return sorted(expected, key=key, reverse=field == "name" and way == "desc")


@pytest.mark.parametrize("sort", sorted(SORTS))
def test_every_sort_pages_through_every_image_once_in_order(grid, sort):
    names, totals = _walk(grid["platform"], sort=sort)
    assert names == _order(grid["expected"], sort)
    assert set(totals) == {COUNT}


def test_filters_page_and_count_the_same_images(grid):
    expected, platform = grid["expected"], grid["platform"]
    cases = {
        "split": ({"split": "val"}, lambda f: f["split"] == "val"),
        "class": ({"class_ids": "1"}, lambda f: any(lbl["classId"] == 1 for lbl in f["labels"] or [])),
        "class past the mask's 63": ({"class_ids": "70,2"},  # the class_list LIKE path
                                     lambda f: any(lbl["classId"] == 2 for lbl in f["labels"] or [])),
        "split and class": ({"split": "train", "class_ids": "0"}, lambda f: f["split"] == "train" and any(
            lbl["classId"] == 0 for lbl in f["labels"] or [])),
        "unlabelled": ({"has_label": "false"}, lambda f: not f["labels"]),  # no label file, or an empty one
        "search": ({"search": "01"}, None),
    }
    for what, (filters, keep) in cases.items():
        names, totals = _walk(platform, **filters)
        want = sorted(n for n, f in expected.items() if (keep(f) if keep else "01" in n))
        assert names == want, what
        assert set(totals) == {len(want)}, what


def test_totals_follow_every_change_to_the_images(grid, alice, client):
    platform, expected = grid["platform"], grid["expected"]
    val = sum(f["split"] == "val" for f in expected.values())
    with_class_2 = sum(any(lbl["classId"] == 2 for lbl in f["labels"] or []) for f in expected.values())
    assert platform.datasets.images("alice", "grid", limit=1)["total"] == COUNT  # remembered from here on
    assert platform.datasets.images("alice", "grid", split="val", limit=1)["total"] == val
    assert platform.datasets.images("alice", "grid", class_ids="2", limit=1)["total"] == with_class_2

    platform.images.delete(expected["img_003.jpg"]["id"])  # a val image with class 2
    assert platform.datasets.images("alice", "grid", limit=1)["total"] == COUNT - 1
    assert platform.datasets.images("alice", "grid", split="val", limit=1)["total"] == val - 1
    assert platform.datasets.images("alice", "grid", class_ids="2", limit=1)["total"] == with_class_2 - 1
    platform.images.update_bulk(image_ids=[expected["img_001.jpg"]["id"]], split="val")
    assert platform.datasets.images("alice", "grid", split="val", limit=1)["total"] == val
    platform.images.update(expected["img_000.jpg"]["id"], body={"labels": [{"classId": 2, "bbox": [.5, .5, .1, .1]}]})
    assert platform.datasets.images("alice", "grid", class_ids="2", limit=1)["total"] == with_class_2


def test_a_total_read_in_a_transaction_that_rolls_back_is_not_kept(grid, app):
    """The rolled-back change bumped the revision the next real change bumps again: a total remembered from
    the first would be taken for the second's."""
    platform, expected = grid["platform"], grid["expected"]
    keys = [expected[n]["id"].rsplit("-", 1)[1] for n in ("img_003.jpg", "img_006.jpg")]
    with pytest.raises(RuntimeError), app.state.lanner.db.session() as session:
        dataset = session.get(Dataset, grid["id"])
        assert dataset is not None
        items.delete_items(session, dataset, keys)
        assert listing.list_images(session, dataset, signer=app.state.lanner.signer, limit=1, offset=0,
                                   cursor=None, include_total=True, split=None, has_error=None, has_label=None,
                                   class_ids=None, text=None, issue=None, sort="name", thumbnails=False,
                                   urls=False, labels=False)["total"] == COUNT - 2
        raise RuntimeError("roll back")
    platform.images.update_bulk(image_ids=[expected["img_001.jpg"]["id"]], split="test")  # the same revision
    assert platform.datasets.images("alice", "grid", limit=1)["total"] == COUNT


def test_issue_codes_are_counted_as_they_are_now(grid, app, client, alice):
    """The health checks rewrite issue codes without a revision bump: errorCount and hasError never come from
    a remembered count. Any code but ``,`` is an error, even one that sorts before it."""
    platform, expected = grid["platform"], grid["expected"]
    first = platform.datasets.images("alice", "grid", has_error="true", limit=50)
    assert first["errorCount"] == 0 and first["total"] == 0 and first["images"] == []
    flagged = {"img_004.jpg": ",duplicate,", "img_009.jpg": ",leakage,tiny_box,", "img_010.jpg": ""}
    with app.state.lanner.db.session() as session:
        for name, codes in flagged.items():
            key = expected[name]["id"].rsplit("-", 1)[1]
            session.execute(update(DatasetItem).where(DatasetItem.key == key).values(issues=codes))
    errors = platform.datasets.images("alice", "grid", has_error="true", limit=50)
    assert sorted(i["name"] for i in errors["images"]) == sorted(flagged)
    assert errors["total"] == errors["errorCount"] == len(flagged)
    clean = platform.datasets.images("alice", "grid", has_error="false", limit=50)
    assert clean["total"] == COUNT - len(flagged) and clean["errorCount"] == len(flagged)
    by_name = {i["name"]: i["error"] for i in errors["images"]}
    assert by_name == {"img_004.jpg": "duplicate", "img_009.jpg": "leakage, tiny_box", "img_010.jpg": None}
    leakage = client.get("/api/datasets/alice/grid/images", params={"issue": "leakage"}, headers=alice.headers)
    assert [i["name"] for i in leakage.json()["images"]] == ["img_009.jpg"] and leakage.json()["total"] == 1


def test_a_page_is_the_sdk_shape_with_links_signed_for_it(grid, app, client, alice):
    platform, expected = grid["platform"], grid["expected"]
    response = client.get("/api/datasets/alice/grid/images", params={"limit": 8, "includeImageUrls": "true",
                                                                     "includeLabels": "true"}, headers=alice.headers)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    page = assert_sdk_type(response.json(), "DatasetsImagesResponse")
    assert page["classes"] == ["a", "b", "c"] and page["nextCursor"] == "8" and page["total"] == COUNT
    signer: URLSigner = app.state.lanner.signer
    for i, image in enumerate(page["images"]):
        assert image["name"] == f"img_{i:03d}.jpg" and image["ext"] == "jpg" and image["bytes"] == 1000 + i
        assert image["id"] == expected[image["name"]]["id"] and image["width"] == 64 + i
        assert image["labels"] == (expected[image["name"]]["labels"] or [])
        assert image["labelCount"] == len(image["labels"]) and image["hash"] == _sha(f"grid-{i}")
        assert ("thumbnailUrl" in image) is bool(i % 7)
        for url in (image["imageUrl"], image.get("thumbnailUrl")):
            if url:
                path, _, query = url.removeprefix(signer.public_url).partition("?")
                params = dict(p.split("=") for p in query.split("&"))
                assert signer.verify("GET", path, params["expires"], params["signature"]), url
    plain = platform.datasets.images("alice", "grid", limit=3, include_thumbnails="false")
    assert all(set(i) == {"id", "hash", "ext", "width", "height", "split", "labelCount", "name", "bytes", "error"}
               for i in plain["images"])


def test_blob_links_are_download_urls(monkeypatch):
    signer = URLSigner(b"k" * 32, "http://lanner.test/", 600)
    monkeypatch.setattr(time, "time", lambda: 1_800_000_000.4)
    link = signer.blob_links()
    for sha, name in ((_sha("a"), "thumb.jpg"), (_sha("b"), "a name/with ü?.PNG")):
        assert link(sha, name) == signer.download_url(sha, name)
    assert signer.blob_links(30)(_sha("a"), "x.jpg") == signer.download_url(_sha("a"), "x.jpg", 30)


def test_only_the_owner_or_the_public_may_list(grid, sdk, alice, bob, client, app):
    intruder = sdk(bob)
    for slug in ("grid", "missing"):
        with pytest.raises(APIError) as hidden:
            intruder.datasets.images("alice", slug)
        assert hidden.value.status_code == 404
    anonymous = client.get("/api/datasets/alice/grid/images")
    assert anonymous.status_code == 401 and "error" in anonymous.json()
    sign_in(client)  # the web session's cookie is a principal too
    assert client.get("/api/datasets/alice/grid/images", params={"limit": 1}).json()["total"] == COUNT
    bad = client.get("/api/datasets/alice/grid/images", params={"sort": "size"}, headers=alice.headers)
    assert bad.status_code == 400 and "sort" in bad.json()["error"]
    grid["platform"].datasets.update("alice", "grid", visibility="public")
    assert intruder.datasets.images("alice", "grid", limit=2)["total"] == COUNT
    with app.state.lanner.db.session() as session:  # a trashed dataset is gone for everyone
        dataset = session.get(Dataset, grid["id"])
        assert dataset is not None
        dataset.deleted_at = dataset.updated_at
    with pytest.raises(APIError) as trashed:
        grid["platform"].datasets.images("alice", "grid")
    assert trashed.value.status_code == 404
