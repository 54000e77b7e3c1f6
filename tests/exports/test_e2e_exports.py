"""Exports end to end: the official SDK and ``ul cloud export`` against a real ``lanner serve``, real export
workers (local executor) on the session's tiny trained detector.

Same boxes: each exported model (ONNX Runtime, TorchScript) predicts the same boxes as ``YOLO(weights).predict``
on the same image at conf=0.001 after NMS: for each of the PyTorch model's 20 most confident boxes, the export
has a box of the same class with IoU >= 0.99 and a confidence within 0.002."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from ultralytics_platform import Platform

from lanner.synthetic import make_detection_dataset
from tests.servers import VENV_BIN, Server, lanner_cli, start_server, trainer_env, yolo_workspace

pytestmark = pytest.mark.e2e
IMGSZ = 64
TOP = 20


def _server(home: Path, port: int | None = None) -> Server:
    return start_server(home, port, LANNER_EXPORT_POLL_SECONDS="0.3")


def _alice_with_weights(tmp_path: Path, weights: Path, models: dict[str, bytes] | None = None
                        ) -> tuple[Server, str, Platform]:
    """A server where alice's model ``shapes/tiny`` has ``weights`` (uploaded the way ``ul`` does), plus
    ``models`` (name -> checkpoint bytes)."""
    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    server = _server(home)
    platform = Platform(base_url=server.url, api_key=key, timeout=60)
    platform.projects.create(owner="alice", project="shapes", name="shapes", visibility="private")
    for name, content in {"tiny": weights.read_bytes(), **(models or {})}.items():
        model = platform.models.create(body={"project": "shapes", "model": name, "name": name})
        slot = platform.upload.signed_url(body={"assetType": "models", "assetId": model["id"], "filename": "best.pt"})
        httpx.put(slot["uploadUrl"], content=content, timeout=60).raise_for_status()
        platform.upload.complete(session_id=slot["sessionId"])
    return server, key, platform


def _wait(platform: Platform, export_id: str, model: str = "tiny", *, until: tuple[str, ...] = (
        "completed", "failed", "cancelled"), timeout: float = 240) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = platform.exports.retrieve("alice", "shapes", model, export_id)["export"]
        if job["status"] in until:
            return job
        time.sleep(0.3)
    raise AssertionError(f"export {export_id} still {job['status']} after {timeout} s")


def _boxes(model_path: Path, image: Path) -> list[tuple[int, float, list[float]]]:
    from ultralytics import YOLO

    result = YOLO(str(model_path), task="detect").predict(str(image), conf=0.001, imgsz=IMGSZ, device="cpu",
                                                          verbose=False)[0]
    rows = zip(result.boxes.cls.tolist(), result.boxes.conf.tolist(), result.boxes.xyxy.tolist(), strict=True)
    return sorted(((int(c), float(p), box) for c, p, box in rows), key=lambda row: -row[1])


def _iou(a: list[float], b: list[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union if union > 0 else 0.0


def assert_same_boxes(reference: list[Any], exported: list[Any]) -> None:
    assert reference, "the tiny detector found nothing even at conf=0.001"
    for cls, conf, box in reference[:TOP]:
        assert any(c == cls and abs(p - conf) <= 0.002 and _iou(b, box) >= 0.99 for c, p, b in exported), (
            f"no exported box matches {cls} {conf:.4f} {box}")


def test_sdk_exports_give_pytorchs_boxes_and_ul_cloud_export_downloads(tmp_path, tiny_weights) -> None:
    server, key, platform = _alice_with_weights(tmp_path, tiny_weights, {"broken": b"not a checkpoint"})
    try:
        image = sorted((make_detection_dataset(tmp_path / "img", train=1, val=1, size=IMGSZ).parent
                        / "images" / "val").glob("*"))[0]
        reference = _boxes(tiny_weights, image)
        jobs = {fmt: platform.exports.create("alice", "shapes", "tiny", format=fmt, args={"imgsz": IMGSZ})
                for fmt in ("onnx", "torchscript")}
        broken = platform.exports.create("alice", "shapes", "broken", format="onnx")
        for job in jobs.values():
            done = _wait(platform, job["id"])
            assert done["status"] == "completed", done.get("error")
            file = done["file"]
            target = tmp_path / "downloads" / file["downloadFilename"]
            target.parent.mkdir(exist_ok=True)
            response = httpx.get(file["downloadUrl"], timeout=60)  # signed: no Authorization header
            assert response.status_code == 200 and len(response.content) == file["size"]
            target.write_bytes(response.content)
            assert_same_boxes(reference, _boxes(target, image))
        again = platform.exports.create("alice", "shapes", "tiny", format="onnx", args={"imgsz": [IMGSZ, IMGSZ]})
        assert again["id"] == jobs["onnx"]["id"]  # the same export: reused, not run again

        failed = _wait(platform, broken["id"], "broken")
        assert failed["status"] == "failed" and "onnx export failed" in failed["error"]["message"], failed

        work = tmp_path / "work"
        work.mkdir()
        env = trainer_env(work, server.url, key)
        yolo_workspace(work, env)
        result = subprocess.run([str(VENV_BIN / "ul"), "cloud", "export", "model=ul://alice/shapes/tiny",
                                 "format=onnx"], cwd=work, env=env, capture_output=True, text=True, timeout=300,
                                check=False)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        assert (work / "tiny.onnx").stat().st_size > 1_000_000
        assert_same_boxes(reference, _boxes(work / "tiny.onnx", image))
    finally:
        server.stop()


def _worker_pids(export_id: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "lanner.exports.worker" in " ".join(process.info["cmdline"] or []) and \
                    export_id in process.environ().get("LANNER_EXPORT_SPEC", ""):
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def test_a_killed_server_finds_its_exports_and_cancel_stops_the_worker(tmp_path, tiny_weights) -> None:
    server, key, platform = _alice_with_weights(tmp_path, tiny_weights)
    try:
        job = platform.exports.create("alice", "shapes", "tiny", format="openvino", args={"imgsz": IMGSZ})
        _wait(platform, job["id"], until=("running",), timeout=60)
        assert _worker_pids(job["id"])
        os.kill(server.process.pid, signal.SIGKILL)  # mid-export: the worker goes on by itself
        server.process.wait()
        port = int(server.url.rsplit(":", 1)[1])
        server = _server(server.home, port)
        done = _wait(platform, job["id"])
        assert done["status"] == "completed", done.get("error")
        assert done["file"]["downloadFilename"] == "tiny_openvino_model.zip"

        slow = platform.exports.create("alice", "shapes", "tiny", format="paddle", args={"imgsz": IMGSZ})
        _wait(platform, slow["id"], until=("running",), timeout=60)
        deadline = time.time() + 30
        while not _worker_pids(slow["id"]) and time.time() < deadline:
            time.sleep(0.2)
        assert _worker_pids(slow["id"])
        assert platform.exports.delete("alice", "shapes", "tiny", slow["id"])["action"] == "cancelled"
        deadline = time.time() + 30
        while _worker_pids(slow["id"]) and time.time() < deadline:
            time.sleep(0.3)
        assert not _worker_pids(slow["id"]), "the cancelled export's worker still runs"
        assert platform.exports.retrieve("alice", "shapes", "tiny", slow["id"])["export"]["status"] == "cancelled"
    finally:
        server.stop()
