"""Answers the official SDK got wrong (issue 27 item 10), through the SDK itself against the app: the trash and
explore with ``type="all"``, public projects in ``explore.search``, datasets in ``account.summary``, and
``account.storage`` and ``account.follow`` (read back by ``account.profile``), each in the SDK's declared
shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from ultralytics_platform import APIError

from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset
from tests.sdk_types import assert_sdk_type
from tests.trained import attach_weights

WEIGHTS_BYTES = 12_345


@pytest.fixture
def shapes(sdk, alice, client, tmp_path):
    """alice's dataset ``shapes`` (6 images, uploaded as the SDK uploads), private."""
    platform = sdk(alice)
    archive = package(make_detection_dataset(tmp_path / "shapes", train=4, val=2, size=64).parent, tmp_path / "zip")
    dataset = upload_dataset(platform, client, "alice", "shapes", archive)
    return platform, dataset


def _weights(tmp_path: Path) -> Path:
    weights = tmp_path / "best.pt"
    weights.write_bytes(b"w" * WEIGHTS_BYTES)
    return weights


def test_trash_with_type_all_lists_what_the_untyped_call_lists(shapes):
    platform, _ = shapes
    platform.datasets.delete("alice", "shapes")
    untyped = platform.lifecycle.trash()
    assert [i["slug"] for i in untyped["items"]] == ["shapes"]
    every = assert_sdk_type(platform.lifecycle.trash(type="all"), "LifecycleTrashResponse")
    assert every["items"] == untyped["items"] and every["total"] == 1
    assert platform.lifecycle.trash(type="dataset")["total"] == 1
    assert platform.lifecycle.trash(type="project")["total"] == 0  # projects are deleted at once, never trashed


def test_explore_finds_public_projects_and_datasets_with_type_all(shapes, sdk, bob, app, alice, tmp_path):
    platform, _ = shapes
    attach_weights(app, alice, _weights(tmp_path), project="demo", model="tiny")
    searcher = sdk(bob)
    assert searcher.explore.search(type="all") == {"projects": [], "datasets": [], "hasMore": False}  # all private
    platform.datasets.update("alice", "shapes", visibility="public")
    platform.projects.update("alice", "demo", visibility="public")
    untyped = assert_sdk_type(searcher.explore.search(), "ExploreSearchResponse")
    assert [d["dataset"] for d in untyped["datasets"]] == ["shapes"]
    assert [(p["owner"], p["project"], p["modelNames"]) for p in untyped["projects"]] == [("alice", "demo", ["tiny"])]
    assert untyped["projects"][0]["totalBytes"] == WEIGHTS_BYTES and untyped["projects"][0]["modelCount"] == 1
    every = assert_sdk_type(searcher.explore.search(type="all"), "ExploreSearchResponse")
    assert every == untyped
    only_projects = searcher.explore.search(type="projects", q="dem")
    assert [p["project"] for p in only_projects["projects"]] == ["demo"] and only_projects["datasets"] == []
    assert searcher.explore.search(type="projects", task="segment")["projects"] == []  # tiny detects
    assert [p["project"] for p in searcher.explore.search(type="projects", task="segment,detect")["projects"]] == [
        "demo"]
    assert searcher.explore.search(type="datasets")["projects"] == []
    paged = searcher.explore.search(type="all", limit=1, offset=1)
    assert paged == {"projects": [], "datasets": [], "hasMore": False}


def test_account_summary_counts_datasets(sdk, alice):
    platform = sdk(alice)
    assert platform.account.summary()["counts"]["datasets"] == 0
    for name in ("one", "two"):
        platform.datasets.create(dataset=name, name=name, visibility="private")
    assert assert_sdk_type(platform.account.summary(), "AccountSummaryResponse")["counts"]["datasets"] == 2
    platform.datasets.delete("alice", "two")
    assert platform.account.summary()["counts"]["datasets"] == 1  # in the trash: not counted


def test_storage_is_the_bytes_of_the_callers_datasets_and_models(shapes, sdk, app, alice, bob, client, tmp_path):
    platform, dataset = shapes
    attach_weights(app, alice, _weights(tmp_path), project="demo", model="tiny")
    image_bytes = platform.datasets.retrieve("alice", "shapes")["dataset"]["totalBytes"]
    assert image_bytes > 0
    storage = assert_sdk_type(platform.account.storage(), "AccountStorageResponse")
    assert storage["username"] == "alice" and storage["tier"] == "free"
    by_kind = storage["breakdown"]["byCategory"]
    assert by_kind == {"datasets": {"bytes": image_bytes, "count": 1}, "models": {"bytes": WEIGHTS_BYTES, "count": 1},
                       "exports": {"bytes": 0, "count": 0}}
    assert storage["usage"]["storage"] == {"current": image_bytes + WEIGHTS_BYTES, "limit": 0, "percent": 0}
    assert storage["breakdown"]["topItems"] == []
    detailed = assert_sdk_type(platform.account.storage(details="true"), "AccountStorageResponse")
    top = detailed["breakdown"]["topItems"]
    assert {(i["type"], i["name"]) for i in top} == {("dataset", "shapes"), ("model", "tiny")}
    assert [i["sizeBytes"] for i in top] == sorted((image_bytes, WEIGHTS_BYTES), reverse=True)  # largest first
    assert next(i for i in top if i["type"] == "model")["parentSlug"] == "demo"
    theirs = assert_sdk_type(sdk(bob).account.storage(details="true"), "AccountStorageResponse")
    assert theirs["usage"]["storage"]["current"] == 0 and theirs["breakdown"]["topItems"] == []
    assert client.get("/api/storage", params={"owner": "alice"}, headers=bob.headers).status_code == 404


def test_follow_is_stored_and_read_back_by_the_profile(shapes, sdk, alice, bob, make_account):
    platform, _ = shapes
    follower, carol = sdk(bob), sdk(make_account("carol"))
    with pytest.raises(APIError) as hidden:  # nothing public yet: the 404 of a name nobody has
        follower.account.follow(username="alice", followed=True)
    assert hidden.value.status_code == 404
    platform.datasets.update("alice", "shapes", visibility="public")
    assert assert_sdk_type(follower.account.follow(username="alice", followed=True), "AccountFollowResponse") == {
        "followed": True, "followerCount": 1}
    assert follower.account.follow(username="alice", followed=True)["followerCount"] == 1  # idempotent
    assert carol.account.follow(username="alice", followed=True)["followerCount"] == 2
    seen = assert_sdk_type(follower.account.profile(username="alice"), "AccountProfileResponse")["user"]
    assert (seen["followerCount"], seen["isFollowed"]) == (2, True)
    assert platform.account.profile(username="alice")["user"]["isFollowed"] is False
    assert follower.account.follow(username="alice", followed=False) == {"followed": False, "followerCount": 1}
    assert follower.account.profile(username="alice")["user"]["isFollowed"] is False
    with pytest.raises(APIError) as self_follow:
        platform.account.follow(username="alice", followed=True)
    assert self_follow.value.status_code == 400
