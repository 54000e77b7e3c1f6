"""benchmarks/gpu_calibrate.py on the CPU (its ``--quick`` mode), and the advisor using what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from lanner.billing.metering import cost_micros
from lanner.gpus import advisor
from lanner.gpus.catalogue import load_catalogue
from lanner.gpus.models import CalibrationPoint

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("calibration") / "cpu.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_calibrate.py"), "--device", "cpu",
                           "--quick", "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture
def session() -> Session:
    engine = create_engine("sqlite://")
    CalibrationPoint.metadata.create_all(engine, tables=[CalibrationPoint.__table__])
    return Session(engine)


def test_quick_run_writes_a_calibration_file_with_its_provenance(calibration_file: Path):
    document = json.loads(calibration_file.read_text())
    assert document["format"] == "lanner-gpu-calibration/1"
    assert document["gpu"]["gpuType"] == "cpu" and document["gpu"]["torch"] and document["date"]
    [point] = document["points"]
    assert point["status"] == "ok" and point["model"] == "yolo11n.yaml" and point["imgsz"] == 64
    assert point["epochSeconds"] > 0 and 0 < point["stepSeconds"] <= point["epochSeconds"]
    assert point["peakMemoryGb"] is None  # no CUDA device: nothing reserved
    assert document["autobatch"]["batch"] == {"yolo11n.yaml": None}


def estimate(session: Session, catalogue, batch: int = 4) -> dict:
    request = advisor.Request(model="yolo11n.yaml", train_images=16, val_images=4,
                              train_args={"epochs": 2, "imgsz": 64, "batch": batch, "workers": 2},
                              gpu_types=["cpu"], tier="enterprise", nc=2)
    [item] = advisor.estimate(session, catalogue, request, price=cost_micros)["estimates"]
    return item


def test_the_advisor_fits_the_type_to_a_calibration_file_and_says_so(calibration_file: Path, session: Session):
    document = json.loads(calibration_file.read_text())
    measured = document["points"][0]["epochSeconds"]
    before = estimate(session, load_catalogue())
    assert "measured" not in before["calibration"] and before["calibration"]["points"] == 0
    catalogue = load_catalogue({"calibration": str(calibration_file)})
    after = estimate(session, catalogue)
    assert after["calibration"]["points"] == 1
    assert after["calibration"]["measured"].startswith("measured on CPU (driver none, torch ")
    assert "gpu_calibrate.py" in after["calibration"]["source"]
    # One point, fitted without bias: the same configuration is predicted as measured (shown to 0.1 s).
    assert after["epochSeconds"]["value"] == pytest.approx(measured, rel=0.02, abs=0.1)


def test_a_measured_point_of_another_type_leaves_this_one_alone(calibration_file: Path, session: Session):
    document = json.loads(calibration_file.read_text())
    document["gpu"].update(gpuType="h100-sxm", name="NVIDIA H100 80GB HBM3")
    other = calibration_file.with_name("h100.json")
    other.write_text(json.dumps(document))
    item = estimate(session, load_catalogue({"calibration": [str(other)]}))
    assert "measured" not in item["calibration"]
