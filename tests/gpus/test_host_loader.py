"""The host behind each GPU type feeds its data loader: vCPUs bound the loader, and the estimate says when the
loader, not the GPU, sets the pace; the memory margin of the chosen batch."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from lanner.billing.metering import cost_micros
from lanner.gpus import advisor, memory
from lanner.gpus.catalogue import load_catalogue
from lanner.gpus.models import CalibrationPoint

COCO = {"train_images": 118_287, "val_images": 5_000}


@pytest.fixture
def session() -> Session:
    engine = create_engine("sqlite://")
    CalibrationPoint.metadata.create_all(engine, tables=[CalibrationPoint.__table__])
    return Session(engine)


def estimates(session: Session, catalogue, model: str = "yolov8n.yaml", **args) -> dict[str, dict]:
    request = advisor.Request(model=model, **COCO, train_args={"epochs": 1, **args},
                              gpu_types=["a100-80gb-sxm", "h100-sxm", "l40s"], tier="enterprise", nc=80)
    return {e["gpuType"]: e for e in advisor.estimate(session, catalogue, request, price=cost_micros)["estimates"]}


def test_ultralytics_worker_rule():
    assert advisor.loader_workers(8, 16, 118_287, 16) == 8
    assert advisor.loader_workers(8, 6, 118_287, 16) == 6
    assert advisor.loader_workers(8, 16, 40, 16) == 3      # no more workers than batches
    assert advisor.loader_workers(8, 16, 16, 16) == 0      # one batch: loaded in-process
    assert advisor.loader_workers(0, 16, 118_287, 16) == 0


def test_coco_on_an_a100_with_its_host_is_loader_bound(session: Session):
    by_type = estimates(session, load_catalogue(), batch=16)
    a100 = by_type["a100-80gb-sxm"]
    assert a100["host"] == {"vcpus": 8.0, "workers": 8, "ramGb": 120.0}
    assert a100["loaderBound"] is True
    # A host with more vCPUs feeds the same A100 faster, and it is the GPU's pace again.
    richer = estimates(session, load_catalogue({"gpus": {"a100-80gb-sxm": {"host_vcpus": 32}}}), batch=16)
    fed = richer["a100-80gb-sxm"]
    assert fed["loaderBound"] is False and fed["host"]["vcpus"] == 32
    assert fed["epochSeconds"]["value"] < a100["epochSeconds"]["value"]


def test_a_large_model_is_gpu_bound_on_the_same_host(session: Session):
    assert estimates(session, load_catalogue(), model="yolo11m.yaml", batch=16)["a100-80gb-sxm"]["loaderBound"] is False


def test_the_memory_margin_of_the_chosen_batch(session: Session):
    """The margin shows the fit as it is decided: the planning figure against the usable part of the card."""
    by_type = estimates(session, load_catalogue(), model="yolo11n.yaml", batch=16)
    l40s = by_type["l40s"]
    margin = l40s["memory"]
    usable = memory.usable_gb(48)
    assert margin["capacityGb"] == pytest.approx(usable, abs=0.01) and margin["cardGb"] == 48
    assert margin["expectedGb"] == pytest.approx(l40s["memoryGb"], abs=0.01)
    assert margin["expectedGb"] < margin["usedGb"]  # planned with the safety margin
    assert margin["largestBatch"] == l40s["maxBatch"] and margin["device"] == "GPU"
    assert margin["freePct"] == pytest.approx(100 * (usable - margin["usedGb"]) / usable, abs=0.1)
    assert margin["text"] == (f"{margin['usedGb']:.1f} of {usable:.1f} usable GB, {margin['freePct']:.0f} % free "
                              f"(expected {margin['expectedGb']:.1f} GB of a 48 GB GPU); "
                              f"largest batch that fits: {l40s['maxBatch']}")
    at_most = estimates(session, load_catalogue(), model="yolo11n.yaml", batch=l40s["maxBatch"])["l40s"]
    assert at_most["fits"] is True and at_most["memory"]["freeGb"] >= 0  # the margin agrees with the fit
    over = estimates(session, load_catalogue(), model="yolo11n.yaml", batch=l40s["maxBatch"] * 2)["l40s"]
    assert over["fits"] is False and over["memory"]["freeGb"] < 0 and "GB over" in over["memory"]["text"]
    assert over["memory"]["freePct"] == 0
