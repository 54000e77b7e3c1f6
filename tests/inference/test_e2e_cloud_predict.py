"""The official CLI against a real ``lanner serve``, unchanged: ``ul cloud predict model=./best.pt`` uploads the
checkpoint and predicts; ``ul cloud predict model=ul://alice/shapes/tiny source=img.jpg`` reads
``metadata.task``, zips ``images[]`` with the frames it decodes itself, and writes the boxes ``YOLO.predict``
finds on the same file."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ultralytics import YOLO

from tests.inference.conftest import encoded, shapes_image
from tests.servers import VENV_BIN, lanner_cli, start_server, trainer_env, yolo_workspace

pytestmark = pytest.mark.e2e
TOLERANCE = 1e-5  # save_txt writes normalised xywh with 6 significant decimals


def _ul(work: Path, env: dict[str, str], *args: str) -> str:
    result = subprocess.run([str(VENV_BIN / "ul"), "cloud", "predict", *args], cwd=work, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


def test_ul_cloud_predict_uploads_a_checkpoint_then_predicts_by_uri(tmp_path: Path, shapes_detector: Path) -> None:
    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    server = start_server(home, LANNER_SUPERVISOR_INTERVAL_SECONDS="0", LANNER_MAINTENANCE_INTERVAL_SECONDS="0")
    try:
        work = tmp_path / "work"
        work.mkdir()
        env = trainer_env(work, server.url, key)
        yolo_workspace(work, env)
        weights = shutil.copyfile(shapes_detector, work / "tiny.pt")
        image = work / "img.jpg"
        image.write_bytes(encoded(shapes_image(160, 120, seed=5)))

        uploaded = _ul(work, env, f"model={weights}", f"source={image}", "project=shapes", "conf=0.01",
                       "imgsz=64", f"save_dir={work / 'first'}")
        assert "Model: ul://alice/shapes/tiny" in uploaded

        output = _ul(work, env, "model=ul://alice/shapes/tiny", f"source={image}", "conf=0.01", "iou=0.6",
                     "imgsz=64", "save_txt=True", f"project={work / 'out'}", "name=by-uri")
        saved = work / "out" / "by-uri"
        assert f"Results saved to {saved}" in output
        response = json.loads((saved / "results.json").read_text())
        assert response["metadata"]["task"] == "detect" and response["metadata"]["model"] == "ul://alice/shapes/tiny"
        assert (saved / "img.jpg").stat().st_size > 0  # the plotted image, drawn by YOLO's own writer

        expected = YOLO(weights).predict(str(image), conf=0.01, iou=0.6, imgsz=64, verbose=False)[0]
        lines = (saved / "labels" / "img.txt").read_text().split("\n")
        rows = np.array([[float(v) for v in line.split()] for line in lines if line.strip()])
        local = np.concatenate([expected.boxes.cls.numpy()[:, None], expected.boxes.xywhn.numpy()], axis=1)
        assert len(rows) == len(local) > 0
        assert np.abs(rows - local).max() <= TOLERANCE, (rows[:3], local[:3])
    finally:
        server.stop()
