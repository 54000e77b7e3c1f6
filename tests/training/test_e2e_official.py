"""Official weights with the unchanged official client against a real ``lanner serve``: the operator registers
the tiny trained detector as ``yolo11n`` (``lanner models add-official``, and a folder for ``yolo26n``), then

- ``ul cloud train model=yolo11n.pt`` finds ``ul://ultralytics/yolo11/yolo11n`` (it used to end in a 404 at that
  lookup, and the worker would have tried to download the weights) and trains from it: the worker fetches the
  operator's copy with its run-scoped key; nothing is downloaded from anywhere else;
- ``ul cloud export model=yolo11n.pt`` clones the official model into the user's project, then exports the
  copy and downloads the file (the formats themselves are the exports' own tests' business)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from ultralytics_platform import Platform

from tests.servers import VENV_BIN, lanner_cli, trainer_env, wait_for, yolo_workspace
from tests.training.orchestration import add_dataset, server_with_credit, settled

pytestmark = pytest.mark.e2e


def test_ul_cloud_train_and_export_resolve_the_official_model_and_clone_it(tmp_path, tiny_weights):
    folder = tmp_path / "official"
    folder.mkdir()
    shutil.copyfile(tiny_weights, folder / "yolo26n.pt")
    server, key = server_with_credit(tmp_path, LANNER_OFFICIAL_MODELS_DIR=str(folder))
    try:
        assert lanner_cli(server.home, "models", "add-official", str(tiny_weights), "--name", "yolo11n") == \
            "ul://ultralytics/yolo11/yolo11n"
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        assert platform.models.retrieve("ultralytics", "yolo26", "yolo26n")["model"]["hasWeights"]  # the folder
        official = platform.models.retrieve("ultralytics", "yolo11", "yolo11n")["model"]
        add_dataset(tmp_path, platform)
        work = tmp_path / "work"
        work.mkdir()
        env = trainer_env(work, server.url, key)
        yolo_workspace(work, env)

        trained = subprocess.run([str(VENV_BIN / "ul"), "cloud", "train", "model=yolo11n.pt",
                                  "data=ul://alice/datasets/shapes", "epochs=1", "imgsz=64", "batch=8", "workers=0",
                                  "gpu_type=cpu", "project=cloud", "name=from-official"],
                                 cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)
        output = trained.stdout + trained.stderr
        assert trained.returncode == 0, output[-4000:]
        assert "Model: ul://alice/cloud/from-official" in output and "GPU: cpu" in output
        model = platform.models.retrieve("alice", "cloud", "from-official")["model"]
        assert model["trainArgs"]["model"] == "ul://ultralytics/yolo11/yolo11n"
        done = wait_for(lambda: settled(platform, "cloud", "from-official"), timeout=300, what="the run to settle")
        assert done["status"] == "completed", done.get("trainingError")
        assert done["hasWeights"] and done["classNames"] == ["circle", "square"]  # the official model's classes

        exported = subprocess.run([str(VENV_BIN / "ul"), "cloud", "export", "model=yolo11n.pt", "format=torchscript",
                                   "imgsz=64", "project=cloud"],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)
        output = exported.stdout + exported.stderr
        assert "Model: ul://alice/cloud/yolo11n" in output, output[-4000:]  # printed once the clone succeeded
        assert exported.returncode == 0, output[-4000:]
        assert list(work.rglob("*.torchscript")), output[-4000:]  # downloaded from the signed URL
        clone = platform.models.retrieve("alice", "cloud", "yolo11n")
        assert clone["isOwner"] and clone["model"]["hasWeights"]
        assert clone["model"]["sourceModelId"] == official["id"]
        assert clone["model"]["file"] == official["file"]  # the same weights, shared
        assert "Traceback" not in server.log.read_text()
    finally:
        server.stop()
