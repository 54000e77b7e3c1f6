"""The hosted platform's own workflow against Lanner, unchanged: ``ul cloud train ... gpu_type=cpu watch``
uploads a local checkpoint and dataset, starts training, follows it and downloads ``best.pt``."""

from __future__ import annotations

import subprocess

import pytest
from ultralytics_platform import Platform

from lanner.synthetic import make_detection_dataset
from tests.servers import VENV_BIN, trainer_env, wait_for, yolo_workspace
from tests.training.orchestration import balance_micros, server_with_credit, settled

pytestmark = pytest.mark.e2e


def test_ul_cloud_train_watch_trains_downloads_and_bills_exactly(tmp_path):
    server, key = server_with_credit(tmp_path)
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        work = tmp_path / "work"
        work.mkdir()
        env = trainer_env(work, server.url, key)
        yolo_workspace(work, env)
        scratch = work / "yolo11n-scratch.pt"
        built = subprocess.run([str(VENV_BIN / "python"), "-c",
                                f"from ultralytics import YOLO; YOLO('yolo11n.yaml').save({str(scratch)!r})"],
                               cwd=work, env=env, capture_output=True, text=True, check=False)
        assert built.returncode == 0 and scratch.exists(), built.stderr
        data = make_detection_dataset(tmp_path / "local-shapes", train=16, val=8, size=128)
        before = balance_micros(platform)

        result = subprocess.run([str(VENV_BIN / "ul"), "cloud", "train", f"model={scratch}", f"data={data}",
                                 "epochs=2", "imgsz=128", "batch=8", "workers=0", "gpu_type=cpu", "project=cloud",
                                 "name=first", "watch"],
                                cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-4000:]
        assert "GPU: cpu at $0.50/h" in output
        best = work / "runs" / "detect" / "cloud" / "first" / "weights" / "best.pt"
        assert best.stat().st_size > 100_000

        uploaded = platform.models.retrieve("alice", "cloud", "yolo11n-scratch")["model"]
        assert uploaded["hasWeights"]
        model = wait_for(lambda: settled(platform, "cloud", "first"), timeout=60, what="settlement")
        assert model["status"] == "completed" and len(model["trainResults"]) == 2
        cost = round(model["computeCost"]["totalCost"] * 1_000_000)
        assert cost > 0
        assert before - balance_micros(platform) == cost  # the balance fell by exactly the model's computeCost

        # Later, from anywhere: `ul cloud download` fetches the same weights and results by URI.
        fetched = subprocess.run([str(VENV_BIN / "ul"), "cloud", "download", "model=ul://alice/cloud/first",
                                  f"project={work / 'later'}", "name=again"],
                                 cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert fetched.returncode == 0, (fetched.stdout + fetched.stderr)[-4000:]
        again = work / "later" / "again"
        assert (again / "weights" / "best.pt").read_bytes() == best.read_bytes()
        assert (again / "results.csv").read_text().count("\n") >= 3  # header + two epochs
    finally:
        server.stop()
