"""A model with a completed ONNX export is served by ONNX Runtime (the export's file, in a real serving process),
and its endpoint gives the boxes ``YOLO(export.onnx).predict`` gives on the same image file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ultralytics import YOLO
from ultralytics_platform import Platform

from tests.conftest import Account
from tests.deployments.conftest import IMGSZ, TOLERANCE, attach, attach_onnx, image_file, wait_status


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_onnx_export_is_served_by_onnx_runtime(endpoint_app: Any, owner: Account, platform: Platform,
                                                  shapes_detector: Path, shapes_onnx: Path, tmp_path: Path) -> None:
    model_id = attach(endpoint_app, owner, shapes_detector)
    export_id = attach_onnx(endpoint_app, model_id, shapes_onnx)
    platform.deployments.create("alice", project="shapes", model="tiny", deployment="tiny-onnx", name="ONNX",
                                region="europe-west4")
    ready = wait_status(platform, "tiny-onnx", "ready")
    assert ready["runtime"] == "onnx" and ready["statusMessage"] == f"serving with ONNX Runtime (export {export_id})"

    image = image_file(tmp_path, seed=7)
    options = {"conf": 0.01, "iou": 0.6, "imgsz": IMGSZ}
    with image.open("rb") as handle:
        answer = platform.deployments.predict("alice", "tiny-onnx", body={"file": handle, **options})
    rows = answer["images"][0]["results"]
    expected = YOLO(shapes_onnx, task="detect").predict(str(image), verbose=False, **options)[0]
    assert len(rows) == len(expected.boxes) > 0
    for row, box, conf, cls in zip(rows, expected.boxes.xyxy.tolist(), expected.boxes.conf.tolist(),
                                   expected.boxes.cls.tolist(), strict=True):
        assert row["class"] == int(cls) and abs(row["confidence"] - conf) <= TOLERANCE
        assert max(abs(a - b) for a, b in zip(row["box"].values(), box, strict=True)) <= TOLERANCE
    assert answer["metadata"]["classNames"] == ["circle", "square"]
