"""Datasets through the official SDK: upload flow, browse, edit, classes, splits, clone, versions, export."""

from __future__ import annotations

import json

import httpx
import pytest
from ultralytics_platform import APIError

from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset, wait_for_import
from tests.sdk_types import assert_sdk_type


@pytest.fixture
def shapes_zip(tmp_path):
    return package(tmp_path / "shapes", tmp_path / "zip") if make_detection_dataset(tmp_path / "shapes", train=12,
                                                                                    val=6) else None


@pytest.fixture
def shapes(sdk, alice, client, shapes_zip):
    platform = sdk(alice)
    dataset = upload_dataset(platform, client, "alice", "shapes", shapes_zip)
    return platform, dataset


def test_upload_flow_ingests_a_yolo_zip(shapes):
    platform, dataset = shapes
    assert dataset["status"] == "ready", dataset.get("processingError")
    assert dataset["imageCount"] == 18 and dataset["splits"]["train"] == 12 and dataset["splits"]["val"] == 6
    assert dataset["task"] == "detect" and dataset["classNames"] == ["circle", "square"]
    assert dataset["format"] == "yolo" and dataset["lastIngestSummary"]["added"] == 18
    assert_sdk_type(platform.datasets.retrieve("alice", "shapes"), "DatasetsRetrieveResponse")
    listed = assert_sdk_type(platform.datasets.list("alice"), "DatasetsListResponse")
    assert [d["dataset"] for d in listed["datasets"]] == ["shapes"]


def test_browse_images_with_filters_and_pages(shapes):
    platform, _ = shapes
    page = assert_sdk_type(platform.datasets.images("alice", "shapes", limit=5, include_labels=True),
                           "DatasetsImagesResponse")
    assert page["total"] == 18 and len(page["images"]) == 5 and page["hasMore"] is True
    assert all(i["labelCount"] == len(i["labels"]) for i in page["images"])
    second = platform.datasets.images("alice", "shapes", limit=5, cursor=page["nextCursor"])
    assert not {i["id"] for i in page["images"]} & {i["id"] for i in second["images"]}
    val = platform.datasets.images("alice", "shapes", split="val", limit=100)
    assert val["total"] == 6 and all(i["split"] == "val" for i in val["images"])
    circles = platform.datasets.images("alice", "shapes", class_ids="0", limit=100, include_labels=True)
    assert circles["total"] > 0 and all(any(lbl["classId"] == 0 for lbl in i["labels"]) for i in circles["images"])
    by_name = platform.datasets.images("alice", "shapes", search="val_0001")
    assert [i["name"] for i in by_name["images"]] == ["val_0001.jpg"]


def test_image_retrieve_update_delete_and_urls(shapes, client):
    platform, _ = shapes
    image = platform.datasets.images("alice", "shapes", limit=1)["images"][0]
    full = assert_sdk_type(platform.images.retrieve(image["id"]), "ImagesRetrieveResponse")
    assert full["properties"]["filename"] == image["name"] and full["classNames"] == ["circle", "square"]
    new_labels = [{"classId": 1, "bbox": [0.5, 0.5, 0.2, 0.2]}]
    updated = assert_sdk_type(platform.images.update(image["id"], body={"labels": new_labels}), "ImagesUpdateResponse")
    assert updated["labelCount"] == 1
    assert platform.images.retrieve(image["id"])["labels"] == new_labels
    urls = assert_sdk_type(platform.images.urls(image_ids=[image["id"]]), "ImagesUrlsResponse")
    assert client.get(urls["urls"][image["id"]]).content[:2] == b"\xff\xd8"
    assert client.get(urls["thumbnails"][image["id"]]).status_code == 200
    with pytest.raises(APIError) as bad:
        platform.images.update(image["id"], body={"labels": [{"classId": 7, "bbox": [0.5, 0.5, 0.1, 0.1]}]})
    assert bad.value.status_code == 400 and "classId" in bad.value.json["error"]
    deleted = assert_sdk_type(platform.images.delete(image["id"]), "ImagesDeleteResponse")
    assert deleted["deletedCount"] == 1
    assert platform.datasets.retrieve("alice", "shapes")["dataset"]["imageCount"] == 17


def test_bulk_split_and_delete(shapes):
    platform, _ = shapes
    ids = [i["id"] for i in platform.datasets.images("alice", "shapes", split="train", limit=3)["images"]]
    moved = assert_sdk_type(platform.images.update_bulk(image_ids=ids, split="test"), "ImagesUpdateBulkResponse")
    assert moved["modifiedCount"] == 3
    assert platform.datasets.retrieve("alice", "shapes")["dataset"]["splits"]["test"] == 3
    gone = assert_sdk_type(platform.images.delete_bulk(image_ids=ids[:2]), "ImagesDeleteBulkResponse")
    assert gone["deletedCount"] == 2


def test_class_stats_merge_and_delete_classes(shapes):
    platform, _ = shapes
    stats = assert_sdk_type(platform.datasets.class_stats("alice", "shapes"), "DatasetsClassStatsResponse")
    total = sum(c["count"] for c in stats["classes"])
    assert len(stats["classes"]) == 2 and total > 0
    merged = assert_sdk_type(platform.datasets.merge_classes("alice", "shapes", source_class_ids=[1],
                                                             target_class_id=0), "DatasetsMergeClassesResponse")
    assert merged["classNames"] == ["circle"]
    after = platform.datasets.class_stats("alice", "shapes")["classes"]
    assert len(after) == 1 and after[0]["count"] == total
    deleted = assert_sdk_type(platform.datasets.delete_classes("alice", "shapes", class_ids=[0]),
                              "DatasetsDeleteClassesResponse")
    assert deleted["deletedAnnotations"] == total and deleted["classNames"] == []


def test_redistribute_splits_is_seeded_and_stratified(shapes):
    platform, _ = shapes
    result = assert_sdk_type(platform.datasets.redistribute_splits("alice", "shapes", train=0.5, val=0.5, test=0),
                             "DatasetsRedistributeSplitsResponse")
    assert result["splits"]["train"] + result["splits"]["val"] == 18 and abs(result["splits"]["val"] - 9) <= 2
    first = {i["name"]: i["split"] for i in platform.datasets.images("alice", "shapes", limit=100)["images"]}
    platform.datasets.redistribute_splits("alice", "shapes", train=0.5, val=0.5, test=0)
    again = {i["name"]: i["split"] for i in platform.datasets.images("alice", "shapes", limit=100)["images"]}
    assert first == again  # same seed, same assignment


def test_clone_is_copy_on_write(shapes):
    platform, original = shapes
    cloned = assert_sdk_type(platform.datasets.clone("alice", "shapes", name="shapes-clone"), "DatasetsCloneResponse")
    assert cloned["imageCount"] == 18 and cloned["dataset"] == "shapes-clone"
    image = platform.datasets.images("alice", "shapes-clone", limit=1, include_labels=True)["images"][0]
    platform.images.update(image["id"], body={"labels": []})
    original_image = next(i for i in platform.datasets.images("alice", "shapes", limit=100, include_labels=True)
                          ["images"] if i["name"] == image["name"] and i["split"] == image["split"])
    assert original_image["labels"] == image["labels"] != []
    assert platform.images.retrieve(image["id"])["labels"] == []


def test_versions_compare_restore_and_export(shapes, client):
    platform, _ = shapes
    v1 = assert_sdk_type(platform.datasets.create_export("alice", "shapes", description="first"),
                         "DatasetsCreateExportResponse")
    assert v1["version"] == 1 and v1["reused"] is False
    again = platform.datasets.create_export("alice", "shapes")
    assert again["version"] == 1 and again["reused"] is True
    image = platform.datasets.images("alice", "shapes", limit=1)["images"][0]
    platform.images.update(image["id"], body={"labels": [{"classId": 0, "bbox": [0.5, 0.5, 0.1, 0.1]}]})
    platform.images.delete(platform.datasets.images("alice", "shapes", limit=2)["images"][1]["id"])
    v2 = platform.datasets.create_export("alice", "shapes")
    assert v2["version"] == 2
    diff = assert_sdk_type(platform.datasets.compare("alice", "shapes", base=1, head=2), "DatasetsCompareResponse")
    assert diff["summary"]["removed"] == 1 and diff["summary"]["modified"] == 1
    changed = next(i for i in diff["items"] if i["change"] == "modified")
    assert changed["name"] == image["name"] and changed["fields"] == ["labels"]
    restored = assert_sdk_type(platform.datasets.restore("alice", "shapes", version=1), "DatasetsRestoreResponse")
    assert restored["imageCount"] == 18
    exported = assert_sdk_type(platform.datasets.export("alice", "shapes", v=2), "DatasetsExportResponse")
    lines = client.get(exported["downloadUrl"]).text.splitlines()
    header, records = json.loads(lines[0]), [json.loads(x) for x in lines[1:]]
    assert header["type"] == "dataset" and header["class_names"] == {"0": "circle", "1": "square"}
    assert len(records) == 17 and all(r["type"] == "image" and r["annotations"].get("boxes") for r in records)
    assert client.get(records[0]["url"]).status_code == 200
    current = assert_sdk_type(platform.datasets.export("alice", "shapes"), "DatasetsExportResponse")
    cached = platform.datasets.export("alice", "shapes")
    assert current["cached"] is False and cached["cached"] is True


def test_export_is_readable_by_the_ultralytics_converter(shapes, tmp_path, client):
    import asyncio

    from ultralytics.data.converter import convert_ndjson_to_yolo

    platform, _ = shapes
    url = platform.datasets.export("alice", "shapes")["downloadUrl"]
    ndjson = tmp_path / "shapes.ndjson"
    ndjson.write_bytes(client.get(url).content)
    records = [json.loads(x) for x in ndjson.read_text().splitlines()[1:]]
    # The converter downloads image URLs over real HTTP; for this in-process test, fetch them through the test
    # client and use the converter's local layout (header "path" + images/<split>/<file>).
    for r in records:
        target = tmp_path / "local" / "images" / r["split"] / r["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(client.get(r["url"]).content)
    header = {**json.loads(ndjson.read_text().splitlines()[0]), "path": "local"}
    ndjson.write_text("\n".join([json.dumps(header), *map(json.dumps, records)]) + "\n")
    data_yaml = asyncio.run(convert_ndjson_to_yolo(ndjson, output_path=tmp_path / "out"))
    labels = list((data_yaml.parent / "labels" / "train").glob("*.txt"))
    assert len(labels) == 12 and all(f.read_text().strip() for f in labels)


def test_other_formats_export(shapes, client, tmp_path):
    import zipfile

    platform, _ = shapes
    yolo = client.get("/api/datasets/alice/shapes/export", params={"format": "yolo"},
                      headers={"Authorization": platform._client._api_key and f"Bearer {platform._client._api_key}"})
    archive = tmp_path / "x.zip"
    archive.write_bytes(client.get(yolo.json()["downloadUrl"]).content)
    names = zipfile.ZipFile(archive).namelist()
    assert "data.yaml" in names and sum(n.startswith("images/") for n in names) == 18
    coco = client.get("/api/datasets/alice/shapes/export", params={"format": "coco"},
                      headers={"Authorization": f"Bearer {platform._client._api_key}"})
    document = client.get(coco.json()["downloadUrl"]).json()
    assert len(document["images"]) == 18 and [c["name"] for c in document["categories"]] == ["circle", "square"]


def test_trash_restore_and_purge(shapes):
    platform, _ = shapes
    assert_sdk_type(platform.datasets.delete("alice", "shapes"), "DatasetsDeleteResponse")
    with pytest.raises(APIError) as gone:
        platform.datasets.retrieve("alice", "shapes")
    assert gone.value.status_code == 404
    trash = assert_sdk_type(platform.lifecycle.trash(), "LifecycleTrashResponse")
    assert [i["slug"] for i in trash["items"]] == ["shapes"] and trash["items"][0]["daysRemaining"] == 30
    assert_sdk_type(platform.lifecycle.restore(id=trash["items"][0]["_id"], type="dataset"), "LifecycleRestoreResponse")
    assert platform.datasets.retrieve("alice", "shapes")["dataset"]["imageCount"] == 18
    platform.datasets.delete("alice", "shapes")
    purged = assert_sdk_type(platform.lifecycle.delete_trash(body={"all": True}), "LifecycleDeleteTrashResponse")
    assert purged["deletedCount"] == 1 and platform.lifecycle.trash()["total"] == 0


def test_public_datasets_are_readable_not_writable_and_searchable(shapes, sdk, bob):
    platform, _ = shapes
    intruder = sdk(bob)
    with pytest.raises(APIError) as hidden:
        intruder.datasets.retrieve("alice", "shapes")
    assert hidden.value.status_code == 404
    assert intruder.explore.search(q="shapes")["datasets"] == []
    assert_sdk_type(platform.datasets.update("alice", "shapes", visibility="public"), "DatasetsUpdateResponse")
    assert intruder.datasets.retrieve("alice", "shapes")["dataset"]["imageCount"] == 18
    found = assert_sdk_type(intruder.explore.search(q="shap"), "ExploreSearchResponse")
    assert [d["dataset"] for d in found["datasets"]] == ["shapes"]
    image = intruder.datasets.images("alice", "shapes", limit=1)["images"][0]
    with pytest.raises(APIError) as denied:
        intruder.images.update(image["id"], body={"labels": []})
    assert denied.value.status_code == 403
    with pytest.raises(APIError) as denied_delete:
        intruder.datasets.delete("alice", "shapes")
    assert denied_delete.value.status_code == 403


def test_health_report_and_issue_filters(sdk, alice, client, tmp_path):
    import shutil

    root = tmp_path / "dirty"
    make_detection_dataset(root, train=10, val=4)
    shutil.copy(root / "images/train/train_0000.jpg", root / "images/val/copy_of_train_0.jpg")  # leakage
    shutil.copy(root / "labels/train/train_0000.txt", root / "labels/val/copy_of_train_0.txt")
    (root / "labels/train/train_0001.txt").unlink()  # unlabelled
    platform = sdk(alice)
    upload_dataset(platform, client, "alice", "dirty", package(root, tmp_path / "zip"))
    report = client.get("/api/datasets/alice/dirty/health", headers=alice.headers)
    assert report.status_code == 200
    body = report.json()
    assert body["issue_counts"]["leakage"] == 2 and body["issue_counts"]["duplicate"] == 2
    assert body["issue_counts"]["unlabeled"] == 1 and body["images_with_issues"] == 3
    leaked = client.get("/api/datasets/alice/dirty/images", params={"issue": "leakage"},  # Lanner filter
                        headers=alice.headers).json()
    assert sorted(i["name"] for i in leaked["images"]) == ["copy_of_train_0.jpg", "train_0000.jpg"]
    errors = platform.datasets.images("alice", "dirty", has_error="true", limit=100)
    assert errors["total"] == 3 and errors["errorCount"] == 3
    unlabeled = platform.datasets.images("alice", "dirty", has_label="false", limit=100)
    assert [i["name"] for i in unlabeled["images"]] == ["train_0001.jpg"]
    assert platform.datasets.retrieve("alice", "dirty")["dataset"]["errorCount"] == 3
    assert "health" in client.get("/openapi.json").json()["paths"]["/api/datasets/{owner}/{dataset}/health"]["get"][
        "summary"].lower()


def test_bad_files_are_reported_and_skipped(sdk, alice, client, tmp_path):
    root = tmp_path / "bad"
    make_detection_dataset(root, train=6, val=3)
    (root / "images/train/train_0002.jpg").write_text("this is not an image")
    (root / "labels/train/train_0003.txt").write_text("0 0.5 0.5 0.2\n")  # four values: malformed
    (root / "labels/val/val_0000.txt").write_text("7 0.5 0.5 0.2 0.2\n")  # class 7 is not in names
    dataset = upload_dataset(sdk(alice), client, "alice", "bad", package(root, tmp_path / "zip"))
    assert dataset["status"] == "ready" and dataset["imageCount"] == 6
    summary = dataset["lastIngestSummary"]
    assert summary["added"] == 6 and summary["errors"] == 3
    assert summary["skippedCounts"] == {"corrupt": 1, "invalid": 2}


def test_a_failed_import_changes_nothing(shapes, client, tmp_path):
    import zipfile

    platform, _ = shapes
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as archive:  # YOLO layout without data.yaml: cannot be understood
        archive.writestr("images/train/a.jpg", b"x")
        archive.writestr("labels/train/a.txt", "0 0.5 0.5 0.1 0.1\n")
    dataset = upload_dataset(platform, client, "alice", "shapes", broken, create=False)
    assert dataset["status"] == "failed" and "data.yaml" in dataset["processingError"]["message"]
    assert dataset["imageCount"] == 18
    assert platform.datasets.images("alice", "shapes", limit=1)["total"] == 18


def test_the_same_image_in_two_datasets_is_stored_once(sdk, alice, client, shapes_zip, app):
    from sqlalchemy import func, select

    from lanner.datasets.models import ImageBlob

    platform = sdk(alice)
    upload_dataset(platform, client, "alice", "one", shapes_zip)
    with app.state.lanner.db.session() as session:
        before = session.scalar(select(func.count()).select_from(ImageBlob))
    upload_dataset(platform, client, "alice", "two", shapes_zip)
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(ImageBlob)) == before == 18
    assert platform.datasets.retrieve("alice", "two")["dataset"]["imageCount"] == 18


def test_sorting_and_selected_images(shapes):
    platform, _ = shapes
    names = [i["name"] for i in platform.datasets.images("alice", "shapes", sort="-name", limit=100)["images"]]
    assert names == sorted(names, reverse=True)
    first = platform.datasets.images("alice", "shapes", limit=2)["images"]
    picked = assert_sdk_type(platform.datasets.selected_images("alice", "shapes", image_ids=[i["id"] for i in first]),
                             "DatasetsSelectedImagesResponse")
    assert sorted(i["id"] for i in picked["images"]) == sorted(i["id"] for i in first)
    platform.datasets.create_export("alice", "shapes")
    assert_sdk_type(platform.datasets.update_export("alice", "shapes", version=1, description="renamed"),
                    "DatasetsUpdateExportResponse")
    assert platform.datasets.retrieve("alice", "shapes")["dataset"]["versions"][0]["description"] == "renamed"


def test_upload_errors(sdk, alice, client, tmp_path):
    platform = sdk(alice)
    created = platform.datasets.create(dataset="x", name="x")
    with pytest.raises(APIError) as bad_name:
        platform.upload.signed_url(body={"assetType": "datasets", "assetId": created["id"], "filename": "a.jpg",
                                         "contentType": "image/jpeg", "totalBytes": 10})
    assert bad_name.value.status_code == 400 and ".zip" in bad_name.value.json["error"]
    signed = assert_sdk_type(platform.upload.signed_url(body={
        "assetType": "datasets", "assetId": created["id"], "filename": "a.zip", "contentType": "x",
        "totalBytes": 3}), "UploadSignedUrlResponse")
    with pytest.raises(APIError) as early:
        platform.datasets.ingest("alice", "x", body={"sessionId": signed["sessionId"]})
    assert early.value.status_code == 409
    too_big = client.put(signed["uploadUrl"], content=b"not a zip at all")  # 16 bytes, 3 were declared
    assert too_big.status_code == 413 and "3 bytes" in too_big.json()["error"]
    assert client.put(signed["uploadUrl"], content=b"abc").status_code == 200  # the refused PUT kept nothing
    platform.datasets.ingest("alice", "x", body={"sessionId": signed["sessionId"]})
    state = wait_for_import(platform, "alice", "x")
    assert state["status"] == "failed" and state["processingError"]["message"]
    assert state["imageCount"] == 0
    assert client.put(signed["uploadUrl"], content=b"again").status_code == 409
    assert httpx.URL(signed["uploadUrl"]).params["signature"]


def test_cli_import_prints_the_uri(tmp_path):
    from tests.servers import lanner_cli

    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "erin")
    root = tmp_path / "shapes"
    make_detection_dataset(root, train=4, val=2)
    archive = package(root, tmp_path / "zip")
    assert lanner_cli(home, "datasets", "import", str(archive), "--owner", "erin", "--name", "Shapes") == \
        "ul://erin/datasets/shapes"
    assert lanner_cli(home, "datasets", "import", str(root), "--owner", "erin", "--name", "Shapes") == \
        "ul://erin/datasets/shapes"  # a folder works too; same names in the same split are reported and skipped
    with pytest.raises(RuntimeError) as refused:
        lanner_cli(home, "datasets", "import", str(tmp_path / "missing.zip"), "--owner", "erin", "--name", "x")
    assert "does not exist" in str(refused.value)


def test_importing_into_a_clone_of_an_empty_dataset_leaves_the_original_empty(sdk, alice, client, shapes_zip):
    platform = sdk(alice)
    platform.datasets.create(dataset="empty", name="empty")
    platform.datasets.clone("alice", "empty", name="filled")
    upload_dataset(platform, client, "alice", "filled", shapes_zip, create=False)
    assert platform.datasets.retrieve("alice", "filled")["dataset"]["imageCount"] == 18
    assert platform.datasets.retrieve("alice", "empty")["dataset"]["imageCount"] == 0
