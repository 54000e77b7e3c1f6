"""The GPU priors: their measured constants, the relative-speed law and the activation-traffic time model.

Published figures are from /work/shared/reference/measured-training.md (IDs in the comments).
"""

from __future__ import annotations

import math

import pytest

from lanner.gpus import memory, priors
from lanner.gpus.catalogue import load_catalogue
from lanner.gpus.estimator import Workload, estimate_time
from lanner.gpus.profile import model_profile

from .test_memory import _yolov5


@pytest.fixture(scope="module")
def specs() -> priors.Specs:
    return priors.catalogue_specs(load_catalogue().all())


def test_measured_constants_are_what_they_say() -> None:
    assert priors.AMP_FACTOR == memory.AMP_FACTOR
    assert priors.A2_ACTIVATION_BYTES_FP32 == _yolov5("yolov5l.yaml", 640)  # YOLOv5l without the anchor-free head


@pytest.mark.parametrize("columns", [2, 3])
def test_the_power_law_is_numpys_least_squares_fit(specs: priors.Specs, columns: int) -> None:
    """The law is fitted in pure Python (a warm `lanner estimate` imports no NumPy): the coefficients
    ``numpy.linalg.lstsq`` finds, to rounding; and a system the B1 rows cannot determine is refused."""
    import numpy as np

    ref = specs[priors.REFERENCE_GPU][:columns]
    rows = [[1.0, *(math.log(v / r) for v, r in zip(specs[gpu][:columns], ref, strict=True))]
            for gpu in priors.B1_RELATIVE]
    target = [math.log(rel) for rel in priors.B1_RELATIVE.values()]
    expected, *_ = np.linalg.lstsq(np.array(rows), np.array(target), rcond=None)
    assert priors._fit_power_law(specs, columns) == pytest.approx(expected.tolist(), rel=1e-12, abs=1e-12)
    with pytest.raises(ValueError, match="do not determine"):
        priors._least_squares(rows[:1], target[:1])  # one row, several unknowns


def test_the_tdp_term_predicts_b1_rows_outside_the_fit_better(specs: priors.Specs) -> None:
    two = {k: v[:2] for k, v in specs.items()}
    # B1: LambdaCloud V100 16GB, A10, A100 40GB PCIe SSD300 AMP relative to an A100 80GB SXM (datasheet specs)
    for spec, measured in [((125.0, 900.0, 300.0), 229 / 458), ((125.0, 600.0, 150.0), 174 / 458),
                           ((312.0, 1555.0, 250.0), 395 / 458)]:
        before = abs(math.log(priors.power_law_speed(two, spec[:2]) / measured))
        after = abs(math.log(priors.power_law_speed(specs, spec) / measured))
        assert after < before and after < math.log(1.2)
    relative = priors.relative_speeds(specs)
    assert relative["a100-80gb-sxm"] == 1.0 and relative["rtx-4090"] == pytest.approx(379 / 458)  # B1 as measured
    assert 0.15 < relative["t4"] < 0.3  # a 70 W card cannot hold its datasheet clocks under tensor load (was 0.33)
    assert relative["t4"] < relative["l4"] < relative["v100-sxm2-32gb"] < relative["a100-80gb-sxm"]
    # without a TDP the law falls back to FP16 and bandwidth
    assert priors.power_law_speed(specs, (125.0, 900.0)) == pytest.approx(priors.power_law_speed(two, (125.0, 900.0)))


def _epoch(scale: str, batch: int, speed) -> float:
    work = Workload(gflops={"s": 16.5, "m": 49.0, "l": 109.1, "x": 205.7}[scale], train_images=118_287,
                    val_images=5_000, epochs=1, batch=batch, workers=8, host_cpus=16, imgsz=640,
                    activation_bytes=_yolov5(f"yolov5{scale}.yaml", 640) * priors.AMP_FACTOR)
    return estimate_time(work, speed, priors.CLOUD_LOADER_640, priors.CLOUD_FIXED).epoch_seconds.value


def test_activation_model_reproduces_a2_and_holds_out_a1(specs: priors.Specs) -> None:
    a2 = priors.gpu_prior(priors.power_law_speed(specs, priors.A2_GPU_SPECS), "A2", 312.0, specs)
    work = Workload(gflops=109.1, train_images=118_287, val_images=0, epochs=1, batch=16, workers=8, host_cpus=12,
                    imgsz=640, activation_bytes=priors.A2_ACTIVATION_BYTES_FP32 * priors.AMP_FACTOR)
    train = estimate_time(work, a2, priors.CLOUD_LOADER_640, priors.CLOUD_FIXED).breakdown["train_per_epoch"]
    assert train == pytest.approx(118_287 / 95, rel=0.01)  # [A2] 95 img/s (fitted)
    v100 = priors.gpu_prior(priors.relative_speeds(specs)["v100-sxm2-32gb"], "prior", 125.0, specs)
    for scale, batch, days in [("s", 64, 2), ("m", 40, 4), ("l", 24, 6), ("x", 16, 8)]:  # [A1], held out
        assert _epoch(scale, batch, v100) == pytest.approx(days * 86_400 / 300, rel=0.2), scale


def test_gpu_priors_carry_the_activation_model_and_the_cpu_does_not(specs: priors.Specs) -> None:
    gpu = priors.gpu_prior(1.0, "prior", 312.0, specs)
    assert gpu.activation_gbs == pytest.approx(priors.reference_activation_gbs(specs))
    assert gpu.segment_image_s == priors.SEGMENT_IMAGE_S and gpu.peak_tflops == 312.0
    cpu = priors.cpu_prior()
    assert cpu.activation_gbs is None and cpu.segment_image_s == 0.0 and cpu.peak_tflops is None
    assert priors.LOADER_640.cached_factor == 0.45  # the CPU device's loader prior is left as it was


def test_segmentation_costs_more_than_detection_on_a_gpu(specs: priors.Specs) -> None:
    speed = priors.gpu_prior(1.0, "prior", 312.0, specs)
    profile = model_profile("yolov8n-seg.yaml")
    act = memory.activation_bytes_per_image(profile, 640) * priors.AMP_FACTOR
    base = dict(gflops=profile.gflops(640), train_images=1000, val_images=100, epochs=1, batch=16, workers=8,
                host_cpus=16, imgsz=640, activation_bytes=act)
    seg = estimate_time(Workload(**base, task="segment"), speed, priors.CLOUD_LOADER_640, priors.CLOUD_FIXED)
    det = estimate_time(Workload(**base), speed, priors.CLOUD_LOADER_640, priors.CLOUD_FIXED)
    assert seg.compute_step_seconds == pytest.approx(det.compute_step_seconds + 16 * priors.SEGMENT_IMAGE_S)
    assert seg.epoch_seconds.value > det.epoch_seconds.value
