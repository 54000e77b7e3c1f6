"""Where a calibration comes from: the closest evidence (same GPU type and model family, same type, same
architecture) and measured start-up, each checked against what the prior alone would say."""

from __future__ import annotations

from typing import Any

import pytest

from lanner.gpus import fit
from lanner.gpus.catalogue import load_catalogue
from lanner.gpus.models import CalibrationPoint


def _point(gpu_type: str, family: str, model: str, epoch_seconds: float, **extra: Any) -> CalibrationPoint:
    values = dict(gpu_type=gpu_type, source="run", model_name=model, family=family, gflops=6.5, imgsz=640,
                  batch=16, train_images=2000, val_images=200, workers=8, host_cpus=16.0, cache=False,
                  epoch_seconds=epoch_seconds, startup_seconds=None, peak_memory_gb=None)
    return CalibrationPoint(**{**values, **extra})


def _prior_epoch(catalogue: Any, gpu: Any, point: CalibrationPoint) -> float:
    return fit._predicted_epoch(point, fit.prior_speed(catalogue, gpu), fit.loader_prior(gpu))


@pytest.fixture
def db(app: Any) -> Any:
    return app.state.lanner.db


def test_a_model_family_is_calibrated_on_its_own_points_first(db: Any) -> None:
    catalogue = load_catalogue()
    gpu = catalogue.get("l40s")
    probe, probe8 = _point("l40s", "yolo11", "yolo11n.yaml", 1.0), _point("l40s", "yolov8", "yolov8n.yaml", 1.0)
    prior, prior8 = _prior_epoch(catalogue, gpu, probe), _prior_epoch(catalogue, gpu, probe8)
    with db.session() as session:
        session.add_all([_point("l40s", "yolo11", "yolo11n.yaml", 3 * prior),
                         _point("l40s", "yolov8", "yolov8n.yaml", prior8)])
        session.flush()
        eleven = fit.calibrate(session, catalogue, gpu, "yolo11")
        eight = fit.calibrate(session, catalogue, gpu, "yolov8")
        other = fit.calibrate(session, catalogue, gpu, "rtdetr")  # no points of its own: the type's
    assert "of yolo11" in eleven.speed.source and "of yolov8" in eight.speed.source
    assert fit._predicted_epoch(probe, eleven.speed, eleven.loader) == pytest.approx(3 * prior, rel=0.02)
    assert fit._predicted_epoch(probe8, eight.speed, eight.loader) == pytest.approx(prior8, rel=0.02)
    assert other.points == 2 and "of " not in other.speed.source


def test_an_unmeasured_type_learns_from_measured_types_of_its_architecture(db: Any) -> None:
    catalogue = load_catalogue()
    measured, sibling, stranger = catalogue.get("l40s"), catalogue.get("rtx-4090"), catalogue.get("h100-sxm")
    assert measured.architecture == sibling.architecture != stranger.architecture
    point = _point("l40s", "yolo11", "yolo11n.yaml", 1.0)
    with db.session() as session:
        session.add(_point("l40s", "yolo11", "yolo11n.yaml", 2 * _prior_epoch(catalogue, measured, point)))
        session.flush()
        learned = fit.calibrate(session, catalogue, sibling)
        untouched = fit.calibrate(session, catalogue, stranger)
    prior = fit.prior_speed(catalogue, sibling)
    assert learned.speed.train_tflops == pytest.approx(prior.train_tflops / 2, rel=0.05)
    assert "measured" in learned.speed.source and learned.points == 0
    assert untouched.speed == fit.prior_speed(catalogue, stranger)


def test_measured_start_up_replaces_the_prior_one(db: Any) -> None:
    catalogue = load_catalogue()
    gpu = catalogue.get("a40")
    with db.session() as session:
        assert fit.fixed_costs(session, gpu) == fit.fixed_costs(None, gpu)
        prior = fit.fixed_costs(None, gpu)
        images = 2200 * prior.per_image_download_s + prior.model_build_s
        session.add_all([_point("a40", "yolo11", "yolo11n.yaml", 30.0, startup_seconds=images + s)
                         for s in (40.0, 50.0, 400.0)])
        session.add(_point("a40", "yolo11", "yolo11n.yaml", 30.0, source="probe", startup_seconds=1.0))
        session.flush()
        measured = fit.fixed_costs(session, gpu)
    assert measured.provision_s == pytest.approx(50.0)  # the median of the runs; probes start no machine
    assert measured.model_build_s == prior.model_build_s
