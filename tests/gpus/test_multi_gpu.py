"""Estimates of a run on several GPUs of one type (DDP on one node): the epoch is one GPU's at the same total batch
divided by count x the catalogue's efficiency (an assumption the estimate states), memory is per GPU for
batch / count, and the cost is count one-GPU runs of the same seconds."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from lanner.billing.metering import cost_micros
from lanner.errors import BadRequest
from lanner.gpus import advisor
from lanner.gpus.catalogue import MULTI_GPU_EFFICIENCY, load_catalogue
from lanner.gpus.estimator import cents
from lanner.gpus.models import CalibrationPoint

DATA = {"train_images": 20_000, "val_images": 2_000}


@pytest.fixture
def session() -> Session:
    engine = create_engine("sqlite://")
    CalibrationPoint.metadata.create_all(engine, tables=[CalibrationPoint.__table__])
    return Session(engine)


def estimate(session: Session, count: int, *, gpu: str = "h100-sxm", price=cost_micros, catalogue=None,
             model: str = "yolo11s.yaml", **args) -> dict:
    request = advisor.Request(model=model, **DATA, train_args={"epochs": 30, **args}, gpu_types=[gpu],
                              tier="enterprise", gpu_count=count)
    return advisor.estimate(session, catalogue or load_catalogue(), request, price=price)["estimates"][0]


def test_nvlink_types_scale_as_measured_and_the_others_as_assumed():
    catalogue = load_catalogue()
    assert MULTI_GPU_EFFICIENCY == {"nvlink": 0.85, "pcie": 0.80}
    for gpu_id in ("a100-80gb-sxm", "h100-sxm", "h100-nvl", "h200-sxm", "h200-nvl", "b200", "b300"):
        assert catalogue.get(gpu_id).multi_gpu_efficiency == 0.85, gpu_id
    for gpu_id in ("a100-80gb-pcie", "h100-pcie", "rtx-4090", "l40s", "rtx-pro-6000", "rtx-2000-ada"):
        assert catalogue.get(gpu_id).multi_gpu_efficiency == 0.80, gpu_id
    assert catalogue.get("cpu").multi_gpu_efficiency is None  # the host trains on one device


def test_an_operator_sets_the_efficiency_and_bad_values_name_the_field():
    catalogue = load_catalogue({"gpus": {"rtx-4090": {"multi_gpu_efficiency": 0.9},
                                         "lab": {"display_name": "Lab", "architecture": "Ampere", "vram_gb": 24,
                                                 "price_per_hour": 0.1}}})
    assert catalogue.get("rtx-4090").multi_gpu_efficiency == 0.9
    assert catalogue.get("lab").multi_gpu_efficiency == MULTI_GPU_EFFICIENCY["pcie"]  # a new type: the default
    assert load_catalogue({"gpus": {"l4": {"multi_gpu_efficiency": None}}}).get("l4").multi_gpu_efficiency is None
    for value in (0, 1.5, -0.5, "0.9", True, float("nan")):
        with pytest.raises(ValueError, match="gpus.l4.multi_gpu_efficiency: must be a number above 0"):
            load_catalogue({"gpus": {"l4": {"multi_gpu_efficiency": value}}})


def test_time_is_one_gpus_epoch_at_the_same_batch_divided_by_count_and_efficiency(session):
    one = estimate(session, 1, batch=32)
    for count in (2, 4, 8):
        many = estimate(session, count, batch=32)
        speedup = count * 0.85
        assert many["epochSeconds"]["value"] == pytest.approx(one["epochSeconds"]["value"] / speedup, abs=0.06)
        assert many["breakdown"]["train_per_epoch"] == pytest.approx(
            one["breakdown"]["train_per_epoch"] / speedup, abs=0.06)
        assert many["breakdown"]["startup"] == one["breakdown"]["startup"]  # start-up does not shrink
        assert many["totalSeconds"]["value"] > 30 * many["epochSeconds"]["value"]
        assert many["totalSeconds"]["value"] < one["totalSeconds"]["value"]
        assert many["scaling"]["speedup"] == pytest.approx(speedup)


def test_cost_is_count_one_gpu_runs_of_the_same_seconds(session):
    seen: list[tuple[float, float]] = []

    def recording(seconds: float, price_per_hour: float) -> int:  # billing's rule, the arguments noted
        seen.append((seconds, price_per_hour))
        return cost_micros(seconds, price_per_hour)

    two = estimate(session, 2, price=recording, batch=32)
    value, low, high = seen[-3:]
    assert {price for _, price in seen[-3:]} == {3.29}  # the rule is asked one GPU's price
    assert two["costCents"] == {"value": cents(2 * cost_micros(*value)), "low": cents(2 * cost_micros(*low)),
                                "high": cents(2 * cost_micros(*high))}
    assert two["pricePerHour"] == 6.58 and two["pricePerGpuHour"] == 3.29 and two["gpuCount"] == 2
    one = estimate(session, 1, batch=32)
    # Twice the price for 1 / (2 x 0.85) of the epochs' time: dearer than one GPU, never twice as dear.
    assert one["costCents"]["value"] < two["costCents"]["value"] < 2 * one["costCents"]["value"]


def test_the_estimate_states_its_scaling_assumption(session):
    assert estimate(session, 1, batch=32)["scaling"] is None
    scaling = estimate(session, 2, gpu="rtx-4090", batch=32)["scaling"]
    assert scaling["efficiency"] == 0.8 and scaling["speedup"] == 1.6 and scaling["measured"] is False
    assert "assumption until runs on several NVIDIA GeForce RTX 4090 GPUs are measured" in scaling["assumption"]
    assert "memory is per GPU, for batch / 2" in scaling["assumption"]


def test_memory_is_per_gpu_for_its_share_of_the_batch(session):
    one = estimate(session, 1, gpu="rtx-4090", batch=16, imgsz=640)
    two = estimate(session, 2, gpu="rtx-4090", batch=32, imgsz=640)
    assert two["batchPerGpu"] == 16 and two["batch"] == 32
    assert two["memoryGb"] == one["memoryGb"] and two["memory"]["usedGb"] == one["memory"]["usedGb"]
    assert two["maxBatch"] == 2 * one["maxBatch"]  # the largest total batch: each GPU's largest, twice
    # A batch too large for one card fits when two share it, and the fit is judged per GPU.
    too_big = one["maxBatch"] + 2
    assert not estimate(session, 1, gpu="rtx-4090", batch=too_big, imgsz=640)["fits"]
    assert estimate(session, 2, gpu="rtx-4090", batch=too_big, imgsz=640)["fits"]
    # The trainer splits with batch // count: an odd batch trains one image short per step.
    odd = estimate(session, 2, gpu="rtx-4090", batch=33, imgsz=640)
    assert (odd["batch"], odd["batchPerGpu"]) == (32, 16)


def test_batches_the_trainer_cannot_split_and_the_host_cpu_are_refused(session):
    with pytest.raises(BadRequest, match="trainArgs.batch: AutoBatch .* does not work on 2 GPUs; give a whole "
                                         "batch, e.g. 16"):
        estimate(session, 2, batch=-1)
    with pytest.raises(BadRequest, match="trainArgs.batch: AutoBatch"):
        estimate(session, 2, batch=0.7)
    with pytest.raises(BadRequest, match="trainArgs.batch: batch 3 split over 4 GPUs leaves a GPU without images"):
        estimate(session, 4, batch=3)
    with pytest.raises(BadRequest, match="gpuCount: CPU .* trains on one device"):
        estimate(session, 2, gpu="cpu", batch=16)


def test_every_type_on_several_gpus_leaves_out_the_host_cpu(session):
    request = advisor.Request(model="yolo11n.yaml", **DATA, train_args={"epochs": 10, "batch": 16}, tier="free",
                              gpu_count=2)
    items = advisor.estimate(session, load_catalogue(), request, price=cost_micros)["estimates"]
    assert "cpu" not in {e["gpuType"] for e in items} and len(items) > 20
    assert all(e["gpuCount"] == 2 and e["pricePerHour"] == round(2 * e["pricePerGpuHour"], 6) for e in items)
