"""End to end: upload a dataset with the SDK flow to the real server, clone it, edit the clone, snapshot a
version, and train the unchanged trainer on ``data=ul://alice/datasets/shapes-clone``."""

from __future__ import annotations

import json

import httpx
import pytest
from ultralytics_platform import Platform

from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset
from tests.servers import lanner_cli, start_server, trainer_env, yolo, yolo_workspace

pytestmark = pytest.mark.e2e
MARK = [0.123456, 0.654321, 0.111111, 0.111111]


def test_train_on_an_edited_clone_leaves_the_original_unchanged(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    server = start_server(home)
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        archive = package(make_detection_dataset(tmp_path / "shapes", train=16, val=8).parent, tmp_path / "zip")
        with httpx.Client(timeout=60) as http:
            dataset = upload_dataset(platform, http, "alice", "shapes", archive)
        assert dataset["status"] == "ready" and dataset["imageCount"] == 24

        platform.datasets.clone("alice", "shapes", name="shapes-clone")
        target = platform.datasets.images("alice", "shapes-clone", split="train", limit=1,
                                          include_labels=True)["images"][0]
        platform.images.update(target["id"], body={"labels": [{"classId": 1, "bbox": MARK}]})
        version = platform.datasets.create_export("alice", "shapes-clone", description="before training")
        assert version["version"] == 1

        work = tmp_path / "work"
        work.mkdir()
        env = trainer_env(work, server.url, key)
        yolo_workspace(work, env)
        result = yolo(work, env, "train", "model=yolo11n.yaml", "data=ul://alice/datasets/shapes-clone", "epochs=2",
                      "imgsz=160", "batch=8", "workers=0", "plots=False", "project=alice/on-datasets")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

        mark = " ".join(f"{v:g}" for v in MARK)
        label_files = list((work / "datasets").rglob("labels/train/*.txt"))
        assert len(label_files) == 16
        assert sum(f"1 {mark}" in f.read_text() for f in label_files) == 1  # the trainer saw the edited label

        model = platform.models.retrieve("alice", "on-datasets", "train")["model"]
        assert model["status"] == "completed" and len(model["trainResults"]) == 2
        assert model["trainArgs"]["data"] == "ul://alice/datasets/shapes-clone"

        original = platform.datasets.images("alice", "shapes", limit=100, include_labels=True)["images"]
        same = next(i for i in original if i["name"] == target["name"] and i["split"] == target["split"])
        assert same["labels"] == target["labels"] and MARK not in [lbl.get("bbox") for lbl in same["labels"]]
        export = httpx.get(platform.datasets.export("alice", "shapes")["downloadUrl"]).text
        assert mark not in " ".join(" ".join(map(str, r)) for line in export.splitlines()[1:]
                                    for r in json.loads(line)["annotations"].get("boxes", []))
    finally:
        server.stop()
