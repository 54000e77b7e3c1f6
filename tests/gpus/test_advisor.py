"""POST /api/training/estimate and learning from runs, through the HTTP API."""

from __future__ import annotations

from datetime import timedelta

import pytest

BODY = {"model": "yolo11n.yaml", "imageCount": {"train": 800, "val": 200},
        "trainArgs": {"epochs": 50, "imgsz": 640, "batch": 16}}


def post(client, account, body):
    return client.post("/api/training/estimate", json=body, headers=account.headers)


def test_estimates_every_offered_gpu_sorted_by_cost(client, alice):
    response = post(client, alice, BODY)
    assert response.status_code == 200, response.text
    body = response.json()
    ids = [e["gpuType"] for e in body["estimates"]]
    assert "cpu" in ids and "rtx-4090" in ids and "h100-sxm" in ids and len(ids) >= 27
    costs = [e["costCents"]["value"] for e in body["estimates"]]
    assert costs == sorted(costs)
    for e in body["estimates"]:
        for key in ("epochSeconds", "totalSeconds", "costCents"):
            assert e[key]["low"] <= e[key]["value"] <= e[key]["high"]
        assert e["batch"] == 16 and isinstance(e["fits"], bool) and e["memoryGb"] > 0
    h200 = next(e for e in body["estimates"] if e["gpuType"] == "h200-sxm")
    assert h200["allowed"] is False  # alice is on the free tier
    picks = {k: v["gpuType"] for k, v in body["recommendation"].items() if v and "gpuType" in v}
    assert set(picks) == {"cheapest", "fastest", "balanced"}
    allowed = {e["gpuType"] for e in body["estimates"] if e["allowed"] and e["fits"]}
    assert set(picks.values()) <= allowed
    assert body["guidance"]["band"] == "small" and "accuracy" in body


def test_each_estimate_says_whether_it_is_on_the_time_cost_pareto_front(client, alice):
    estimates = post(client, alice, BODY).json()["estimates"]
    usable = [e for e in estimates if e["fits"] and e["allowed"]]

    def beaten(e):
        time, cost = e["totalSeconds"]["value"], e["costCents"]["value"]
        return any(o["totalSeconds"]["value"] <= time and o["costCents"]["value"] <= cost
                   and (o["totalSeconds"]["value"] < time or o["costCents"]["value"] < cost) for o in usable)

    front = {e["gpuType"] for e in estimates if e["pareto"]}
    assert front == {e["gpuType"] for e in usable if not beaten(e)}
    assert front and len(front) < len(usable)
    assert not any(e["pareto"] for e in estimates if not e["allowed"])  # h200-sxm: alice's tier may not use it


def test_weights_names_are_profiled_through_their_yaml(client, alice, tmp_path, monkeypatch):
    (tmp_path / "yolo11n.pt").write_bytes(b"not a checkpoint: the API must never open it")
    monkeypatch.chdir(tmp_path)
    body = post(client, alice, {**BODY, "model": "yolo11n.pt", "gpuTypes": ["cpu"]}).json()
    assert body["model"]["name"] == "yolo11n.yaml" and body["model"]["params"] > 2_000_000


def test_faster_gpus_are_faster_and_autobatch_is_resolved(client, alice):
    body = post(client, alice, {**BODY, "gpuTypes": ["rtx-2000-ada", "h100-sxm"],
                                "trainArgs": {"epochs": 50, "batch": -1}}).json()
    small, big = sorted(body["estimates"], key=lambda e: e["vramGb"])
    assert small["gpuType"] == "rtx-2000-ada" and small["batch"] < big["batch"]
    assert big["totalSeconds"]["value"] < small["totalSeconds"]["value"]
    assert small["maxBatch"] < big["maxBatch"]


def test_deadline_and_budget(client, alice):
    body = post(client, alice, {**BODY, "imageCount": {"train": 50000, "val": 5000}, "deadlineMinutes": 120,
                                "budgetCents": 5000}).json()
    cheapest = body["recommendation"]["cheapest"]
    if cheapest is not None:
        chosen = next(e for e in body["estimates"] if e["gpuType"] == cheapest["gpuType"])
        assert chosen["totalSeconds"]["value"] <= 7200 and chosen["costCents"]["value"] <= 5000
        assert "deadline" in cheapest["reason"]
    assert "guidance" not in body


def test_a_deadline_nothing_meets_is_not_said_to_be_met(client, alice):
    """The newcomer's case: yolo11s on 20,000 images for 50 epochs within 60 minutes; no GPU a free account may
    use gets there, and no pick may claim it does."""
    body = post(client, alice, {"model": "yolo11s.yaml", "imageCount": {"train": 20000, "val": 2000},
                                "trainArgs": {"epochs": 50, "imgsz": 640, "batch": 16},
                                "deadlineMinutes": 60}).json()
    usable = [e for e in body["estimates"] if e["fits"] and e["allowed"]]
    assert min(e["totalSeconds"]["value"] for e in usable) > 3600
    picks = body["recommendation"]
    assert picks["cheapest"] is None
    # The picks are among the types this server can run (here its CPU), as in the train dialog.
    fastest = min((e for e in usable if e["availability"] is not None), key=lambda e: e["totalSeconds"]["value"])
    assert picks["note"]["reason"].startswith("No allowed GPU that fits meets your 60 min deadline; the fastest is "
                                              f"{fastest['displayName']} at ")
    for kind in ("fastest", "balanced"):
        assert "meets your" not in picks[kind]["reason"], picks[kind]["reason"]
        assert "does not meet your 60 min deadline" in picks[kind]["reason"]


@pytest.mark.parametrize("change, status, field", [
    ({"gpuTypes": ["tpu-v5"]}, 400, "gpuTypes"),
    ({"trainArgs": {"epochs": -1}}, 400, "trainArgs.epochs"),
    ({"trainArgs": {"imgsz": 0}}, 400, "trainArgs.imgsz"),
    ({"trainArgs": {"epoch": 5}}, 422, "trainArgs.epoch"),
    ({"model": "yolo99z.yaml"}, 400, "model"),
    ({"model": "/etc/passwd.pt"}, 400, "model"),
    ({"model": "../runs/best.pt"}, 400, "model"),
    ({"imageCount": None, "dataset": "ul://bob/datasets/secret"}, 404, "dataset"),
    ({"imageCount": None}, 400, "dataset"),
    ({"trainArgs": {"optimizer": "foo"}}, 400, "trainArgs.optimizer"),
    ({"trainArgs": {"imgsz": 100_000}}, 400, "trainArgs.imgsz"),
    ({"trainArgs": {"epochs": True}}, 400, "trainArgs.epochs"),
    ({"gpuTypes": []}, 400, "gpuTypes"),
    ({"model": "ul://alice/nope/m"}, 404, "model"),
    ({"model": "ul://bob/secret/m"}, 404, "model"),
])
def test_bad_input_names_the_field(client, alice, change, status, field):
    body = {k: v for k, v in {**BODY, **change}.items() if v is not None}
    response = post(client, alice, body)
    assert response.status_code == status, response.text
    assert field in response.json()["error"]


def test_estimate_from_a_dataset_uses_its_counts(client, alice, sdk, tmp_path):
    from lanner.synthetic import make_detection_dataset
    from tests.datasets.helpers import package, upload_dataset

    archive = package(make_detection_dataset(tmp_path / "d", train=10, val=5).parent, tmp_path / "zip")
    upload_dataset(sdk(alice), client, "alice", "shapes", archive)
    body = post(client, alice, {"model": "yolo11n.yaml", "dataset": "ul://alice/datasets/shapes",
                                "trainArgs": {"epochs": 3}}).json()
    assert body["images"] == {"train": 10, "val": 5}


def _fake_run(app, alice, *, epoch_seconds: float, epochs: int = 4, imgsz: int = 320, batch: int = 8,
              gpu_type: str | None = None, gpu_memory_pct: list[float] | None = None):
    """A run as the protocol stores it, with epoch timestamps set to a known cadence."""
    from sqlalchemy import select, update

    from lanner.gpus.catalogue import load_catalogue
    from lanner.gpus.profile import model_profile
    from lanner.projects.models import ModelRecord, Project
    from lanner.training.learn import record_run
    from lanner.training.models import ConsoleChunk, EpochMetric, Run, SystemMetric

    with app.state.lanner.db.session() as session:
        project = Project(owner_id=alice.user_id, slug=f"p{epoch_seconds}", name="p", tags=[], metadata_={})
        session.add(project)
        session.flush()
        model = ModelRecord(project_id=project.id, owner_id=alice.user_id, slug="m", name="m", metadata_={},
                            model_info={"gflops": model_profile("yolo11n.yaml").gflops(imgsz)})
        session.add(model)
        session.flush()
        run = Run(model_id=model.id, status="completed", epochs=epochs, device="cuda:0" if gpu_type else "cpu",
                  gpu_type=gpu_type,
                  train_args={"model": "yolo11n.yaml", "imgsz": str(imgsz), "batch": str(batch), "workers": "2",
                              "epochs": str(epochs)}, environment={"cpuCount": 2})
        session.add(run)
        session.flush()
        session.add(ConsoleChunk(model_id=model.id, run_id=run.id, chunk_id=1, content=(
            "train: Scanning /x/labels/train... 64 images, 0 backgrounds, 0 corrupt: 100%\n"
            "val: Scanning /x/labels/val... 16 images, 0 backgrounds, 0 corrupt: 100%\n"), line_count=2))
        for epoch in range(epochs):
            session.add(EpochMetric(model_id=model.id, run_id=run.id, epoch=epoch, metrics={}))
        for pct in gpu_memory_pct or []:  # as the trainer's system_metrics events carry them
            session.add(SystemMetric(run_id=run.id, data={"cpu": 50.0, "gpus": {"0": {"usage": 90, "memory": pct}}}))
        session.flush()
        start = run.created_at
        for epoch in range(epochs):
            session.execute(update(EpochMetric).where(EpochMetric.run_id == run.id, EpochMetric.epoch == epoch)
                            .values(created_at=start + timedelta(seconds=10 + epoch_seconds * (epoch + 1))))
        session.flush()
        run = session.scalar(select(Run).where(Run.id == run.id))
        point = record_run(session, model, run, catalogue=load_catalogue())
        assert point is not None and point.epoch_seconds == pytest.approx(epoch_seconds)
        assert point.train_images == 64 and point.val_images == 16 and point.gpu_type == (gpu_type or "cpu")
        return point


def test_finished_runs_calibrate_the_estimate(client, alice, app):
    body = {"model": "yolo11n.yaml", "imageCount": {"train": 64, "val": 16}, "gpuTypes": ["cpu"],
            "trainArgs": {"epochs": 4, "imgsz": 320, "batch": 8, "workers": 2}}
    before = post(client, alice, body).json()["estimates"][0]
    assert before["calibration"]["points"] == 0
    _fake_run(app, alice, epoch_seconds=42.0)
    after = post(client, alice, body).json()
    estimate = after["estimates"][0]
    assert estimate["calibration"]["points"] == 1
    assert estimate["epochSeconds"]["value"] == pytest.approx(42.0, rel=0.02)
    _fake_run(app, alice, epoch_seconds=40.0)
    _fake_run(app, alice, epoch_seconds=44.0)
    accuracy = post(client, alice, body).json()["accuracy"]
    assert accuracy["runs"] == 3 and accuracy["medianAbsErrorPct"] < 10


def test_measured_peak_memory_corrects_the_memory_model_within_bounds(client, alice, app):
    from lanner.gpus.fit import MEMORY_CORRECTION_BOUNDS

    body = {"model": "yolo11n.yaml", "imageCount": {"train": 64, "val": 16}, "gpuTypes": ["l40s", "a40"],
            "trainArgs": {"epochs": 4, "imgsz": 320, "batch": 8, "workers": 2}}
    before = {e["gpuType"]: e for e in post(client, alice, body).json()["estimates"]}
    predicted = before["l40s"]["memoryGb"]
    vram = before["l40s"]["vramGb"]
    # The card showed 10 % more than predicted at its busiest (readings are percent of the card).
    pct = 100 * 1.10 * predicted / vram
    point = _fake_run(app, alice, epoch_seconds=5.0, gpu_type="l40s", gpu_memory_pct=[pct / 2, pct, pct / 3])
    assert point.peak_memory_gb == pytest.approx(1.10 * predicted, abs=0.02)
    after = {e["gpuType"]: e for e in post(client, alice, body).json()["estimates"]}
    assert after["l40s"]["memoryGb"] == pytest.approx(1.10 * predicted, rel=0.03)
    assert after["a40"]["memoryGb"] == before["a40"]["memoryGb"]  # another type keeps its own model
    # The largest batch follows the same corrected figure as ``fits``: it shrinks, and it is exactly the edge.
    largest = after["l40s"]["maxBatch"]
    assert largest < before["l40s"]["maxBatch"] and after["a40"]["maxBatch"] == before["a40"]["maxBatch"]
    for batch, fits in ((largest, True), (largest + 1, False)):
        at = post(client, alice, {**body, "gpuTypes": ["l40s"], "trainArgs": {**body["trainArgs"], "batch": batch}})
        assert at.json()["estimates"][0]["fits"] is fits, batch
    _fake_run(app, alice, epoch_seconds=5.5, gpu_type="l40s", gpu_memory_pct=[99.0])
    _fake_run(app, alice, epoch_seconds=6.0, gpu_type="l40s", gpu_memory_pct=[99.0])
    shared = {e["gpuType"]: e for e in post(client, alice, body).json()["estimates"]}
    assert shared["l40s"]["memoryGb"] == pytest.approx(MEMORY_CORRECTION_BOUNDS[1] * predicted, rel=0.03)


def test_large_source_images_slow_a_loader_bound_run(client, alice):
    body = {"model": "yolo11n.yaml", "imageCount": {"train": 5000, "val": 500}, "gpuTypes": ["h100-sxm"],
            "trainArgs": {"epochs": 10, "imgsz": 640, "batch": 32, "workers": 2}}

    def epoch(**extra):
        response = post(client, alice, {**body, **extra})
        assert response.status_code == 200, response.text
        return response.json()["estimates"][0]

    default, coco = epoch(), epoch(imageSize=[640, 480])
    photo = epoch(imageSize=[4000, 3000])  # 12 MP camera images: the JPEG decode is ~40x a COCO image's
    assert default["loaderBound"] and photo["loaderBound"]
    assert coco["epochSeconds"] == default["epochSeconds"]  # the priors' own source size changes nothing
    assert photo["epochSeconds"]["value"] > 3 * coco["epochSeconds"]["value"]
    cached = epoch(imageSize=[4000, 3000], trainArgs={**body["trainArgs"], "cache": "ram"})
    assert cached["epochSeconds"]["value"] < photo["epochSeconds"]["value"] / 2  # decoded once, then reused
    assert post(client, alice, {**body, "imageSize": [4000, 0]}).status_code == 400
