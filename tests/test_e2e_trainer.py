"""End to end: the real server, the operator CLI, the unchanged ``yolo`` trainer and the official SDK."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
import torch
from ultralytics_platform import Platform

from lanner.synthetic import make_detection_dataset
from tests.sdk_types import assert_sdk_type
from tests.servers import VENV_BIN, lanner_cli, start_server, trainer_env, yolo, yolo_workspace

pytestmark = pytest.mark.e2e

TRAIN = ["train", "model=yolo11n.yaml", "epochs=2", "imgsz=160", "project=alice/shapes", "plots=False",
         "workers=0", "batch=8"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    home = root / "home"
    home.mkdir()
    assert lanner_cli(home, "users", "create", "alice", "--password", "alice-password") == "alice"
    key = lanner_cli(home, "keys", "create", "alice")
    server = start_server(home)
    data = make_detection_dataset(root / "shapes")
    work = root / "work"
    work.mkdir()
    env = trainer_env(work, server.url, key)
    yolo_workspace(work, env)
    try:
        yield {"server": server, "key": key, "data": data, "work": work, "env": env,
               "sdk": Platform(base_url=server.url, api_key=key, timeout=60)}
    finally:
        server.stop()


def _train(world, *extra: str) -> subprocess.CompletedProcess:
    result = yolo(world["work"], world["env"], *TRAIN, f"data={world['data']}", *extra)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def test_trainer_streams_a_run_that_the_sdk_reads_back(world):
    result = _train(world)
    assert "/alice/shapes/train" in result.stdout + result.stderr  # the trainer printed our modelUrl
    sdk = world["sdk"]
    retrieved = assert_sdk_type(sdk.models.retrieve("alice", "shapes", "train"), "ModelsRetrieveResponse")
    model = retrieved["model"]
    assert model["status"] == "completed"
    assert [r["epoch"] for r in model["trainResults"]] == [0, 1]
    assert all("train/box_loss" in r["metrics"] for r in model["trainResults"])
    console = "".join(chunk["content"] for chunk in model["consoleChunks"])
    assert "Starting training for 2 epochs" in console
    # The trainer colours its console; Lanner stores it plain, so people and the advisor read the same lines.
    assert "\x1b" not in console and "train: Scanning" in console
    # The finished run taught the GPU advisor its CPU speed: the advice says what it learned from.
    estimate = httpx.post(f"{world['server'].url}/api/training/estimate", timeout=60,
                          headers={"Authorization": f"Bearer {world['key']}"},
                          json={"model": "yolo11n.yaml", "imageCount": {"train": 16, "val": 8}, "gpuTypes": ["cpu"]})
    assert estimate.status_code == 200, estimate.text
    assert estimate.json()["accuracy"]["learnedFrom"] == 1
    assert model["hasWeights"] is True and model["classNames"] == ["circle", "square"]
    assert model["task"] == "detect"

    files = assert_sdk_type(sdk.models.files("alice", "shapes", "train"), "ModelsFilesResponse")["files"]
    download = httpx.get(files[0]["downloadUrl"], timeout=60)
    assert download.status_code == 200 and len(download.content) == files[0]["size"]
    weights = world["work"] / "downloaded.pt"
    weights.write_bytes(download.content)
    checkpoint = torch.load(weights, map_location="cpu", weights_only=False)
    assert checkpoint["model"] is not None and checkpoint["train_args"]["imgsz"] == 160

    job = assert_sdk_type(sdk.models.training("alice", "shapes", "train"), "ModelsTrainingResponse")["job"]
    assert job["status"] == "completed" and job["progress"]["currentEpoch"] == 2

    image = next((Path(world["data"]).parent / "images" / "val").glob("*.jpg"))
    predicted = yolo(world["work"], world["env"], "predict", "model=ul://alice/shapes/train", f"source={image}",
                     "imgsz=160", "save=False")
    assert predicted.returncode == 0, predicted.stdout[-3000:] + predicted.stderr[-3000:]
    assert "image 1/1" in predicted.stdout + predicted.stderr


def test_second_run_gets_the_next_slug_and_can_start_from_ul_weights(world):
    args = [a for a in TRAIN if not a.startswith("model=")]
    result = yolo(world["work"], world["env"], *args, "model=ul://alice/shapes/train", f"data={world['data']}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    models = world["sdk"].models.list("alice", "shapes")["models"]
    assert sorted(m["model"] for m in models) == ["train", "train-2"]
    assert all(m["status"] == "completed" for m in models)
    second = world["sdk"].models.retrieve("alice", "shapes", "train-2")["model"]
    assert second["trainArgs"]["model"].startswith("ul://alice/shapes/train")
    assert [r["epoch"] for r in second["trainResults"]] == [0, 1]


def test_cancel_after_first_epoch_stops_the_real_trainer(world):
    epochs = 40
    args = [a if not a.startswith("epochs=") else f"epochs={epochs}" for a in TRAIN] + [f"data={world['data']}",
                                                                                    "name=cancel-me"]
    process = subprocess.Popen([str(VENV_BIN / "yolo"), *args], cwd=world["work"], env=world["env"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sdk = world["sdk"]
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if sdk.models.retrieve("alice", "shapes", "cancel-me")["model"].get("trainResults"):
                    break
            except Exception:
                pass
            time.sleep(0.3)
        else:
            pytest.fail("the first epoch never arrived")
        assert lanner_cli(world["server"].home, "runs", "cancel", "alice/shapes/cancel-me").isdigit()
        output, _ = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output[-3000:]
    assert "Training cancelled from Platform" in output
    model = sdk.models.retrieve("alice", "shapes", "cancel-me")["model"]
    assert model["status"] == "cancelled"
    assert 1 <= len(model["trainResults"]) < epochs
