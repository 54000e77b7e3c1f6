"""``training.start`` through the SDK: validation naming the field, tiers (403), credit (402), the hold, and
20 concurrent starts against a balance that covers exactly 5."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from sqlalchemy import func, select
from ultralytics_platform import APIError

from lanner.billing import service as billing
from lanner.billing.models import LedgerPosting
from lanner.training.models import Run
from tests.training.conftest import ARGS, new_model


def credit(app: Any, account: Any, micros: int) -> None:
    with app.state.lanner.db.session() as session:
        billing.top_up(session, user_id=account.user_id, micros=micros)


def start(platform: Any, model_id: str, gpu_type: str = "cpu", **args: Any) -> dict[str, Any]:
    return platform.training.start(model_id=model_id, gpu_type=gpu_type, train_args={**ARGS, **args})


@pytest.mark.parametrize(("args", "field", "status"), [
    ({"epoch": 3}, "trainArgs.epoch", 422),
    ({"epochs": -1}, "trainArgs.epochs", 422),
    ({"epochs": "many"}, "trainArgs.epochs", 422),
    ({"imgsz": 0}, "trainArgs.imgsz", 422),
    ({"data": "coco8.yaml"}, "trainArgs.data", 422),
    ({"data": "ul://bob/datasets/secret"}, "trainArgs.data", 422),
    ({"model": "ul://bob/p/none"}, "trainArgs.model", 422),
    ({"model": "../../etc/passwd.pt"}, "trainArgs.model", 422),
    ({"batch": 100000}, "trainArgs.batch", 422),
])
def test_bad_arguments_are_refused_naming_the_field(shapes, app, alice, args, field, status):
    credit(app, alice, 10_000_000)
    model_id = new_model(shapes, "bad")
    with pytest.raises(APIError) as error:
        start(shapes, model_id, **args)
    assert error.value.status_code == status
    assert field in str(error.value)


def test_gpu_type_is_checked_against_catalogue_tier_and_executor(shapes, app, alice, fake_executor):
    credit(app, alice, 100_000_000)
    model_id = new_model(shapes, "gpus")
    for gpu, status, words in [("tpu-v9", 422, "unknown GPU type"), ("h200-sxm", 403, "needs the pro tier"),
                               ("rtx-4090", 422, "no worker here")]:
        with pytest.raises(APIError) as error:
            start(shapes, model_id, gpu)
        assert error.value.status_code == status and words in str(error.value), (gpu, str(error.value))
    started = start(shapes, model_id, "h100-sxm")
    assert started["gpuType"] == "h100-sxm"
    with app.state.lanner.db.session() as session:
        assert session.get(Run, started["runId"]).started_by_id == alice.user_id  # shown as "started by"


def test_insufficient_credit_is_402_with_balance_and_estimate(shapes, app, alice, client, fake_executor):
    model_id = new_model(shapes, "poor")
    response = client.post("/api/training/start", headers=alice.headers,
                           json={"modelId": model_id, "gpuType": "cpu", "trainArgs": ARGS})
    assert response.status_code == 402
    body = response.json()
    assert body["code"] == "insufficient_credits" and body["balanceCents"] == 0
    assert body["estimatedCostCents"] > 0 and "available" in body["error"]
    with app.state.lanner.db.session() as session:  # a refused start leaves nothing behind
        assert session.scalar(select(func.count()).select_from(LedgerPosting)) == 0
    assert shapes.models.training("alice", "p", "poor")["job"] is None


def test_start_holds_the_estimate_and_reports_it(shapes, app, alice, client, fake_executor):
    credit(app, alice, 1_000_000)
    model_id = new_model(shapes, "held")
    started = start(shapes, model_id)
    assert started["status"] == "starting" and started["estimatedCost"]["pricePerHour"] == 0.5
    assert started["billing"]["estimatedCostDisplay"].startswith("$")
    hold = started["holdCents"]
    assert hold == math.ceil(started["estimate"]["costCents"]["high"]) >= started["billing"]["estimatedCostCents"]
    assert started["billing"]["balanceCents"] == pytest.approx(100 - hold)
    summary = shapes.billing.usage_summary()
    assert summary["creditsCents"] == 100 and summary["trainingCredit"]["balanceAvailable"] == pytest.approx(100 - hold)
    with pytest.raises(APIError) as error:  # one active run per model
        start(shapes, model_id)
    assert error.value.status_code == 409


def test_twenty_concurrent_starts_against_credit_for_five(shapes, app, alice, client, fake_executor, supervisor,
                                                          sdk):
    estimate = client.post("/api/training/estimate", headers=alice.headers, json={
        "model": "yolo11n.yaml", "dataset": "ul://alice/datasets/shapes", "gpuTypes": ["cpu"],
        "trainArgs": {k: v for k, v in ARGS.items() if k not in ("model", "data")}}).json()
    assert estimate["estimates"][0]["availability"] == "High"  # from the executor's free capacity
    hold_micros = billing.cents_to_micros(math.ceil(estimate["estimates"][0]["costCents"]["high"]))
    topup = 5 * hold_micros + hold_micros // 2
    credit(app, alice, topup)
    model_ids = [new_model(shapes, f"m{i}") for i in range(20)]
    results: list[int] = []
    barrier = threading.Barrier(20)

    def go(model_id: str) -> None:
        barrier.wait()
        response = client.post("/api/training/start", headers=alice.headers,
                               json={"modelId": model_id, "gpuType": "cpu", "trainArgs": ARGS})
        results.append(response.status_code)

    threads = [threading.Thread(target=go, args=(m,)) for m in model_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [200] * 5 + [402] * 15

    supervisor.run_once()  # the five launch and are metered
    assert len(fake_executor.launched) == 5
    with app.state.lanner.db.session() as session:
        assert billing.balances(session, user_id=alice.user_id).available >= 0
    backdate(app, seconds=50)  # the five have run for 50 s: metering charges them (within their holds)
    supervisor.run_once()
    for model_id in model_ids:
        response = client.delete(f"/api/models/alice/p/{model_slug(model_ids, model_id)}/training",
                                 headers=alice.headers)
        assert response.status_code in (200, 409)
    supervisor.run_once()
    with app.state.lanner.db.session() as session:
        balances = billing.balances(session, user_id=alice.user_id)
        charges = session.scalar(select(func.coalesce(func.sum(LedgerPosting.amount_micros), 0))
                                 .where(LedgerPosting.account == "revenue"))
        assert balances.held == 0
        assert charges >= 5 * (500_000 * 50 // 3600)  # at least 50 s each at $0.50/h
        assert balances.available == topup - charges
        assert session.scalar(select(func.sum(LedgerPosting.amount_micros))) == 0  # double entry balances


def model_slug(model_ids: list[str], model_id: str) -> str:
    return f"m{model_ids.index(model_id)}"


def backdate(app: Any, *, seconds: float, alive: bool = False) -> None:
    """Pretend every running attempt started ``seconds`` earlier; ``alive``: and reported just now."""
    from datetime import timedelta

    from sqlalchemy import update

    from lanner.db import utcnow
    from lanner.training.models import Run

    with app.state.lanner.db.session() as session:
        for run in session.scalars(select(Run).where(Run.attempt_started_at.is_not(None))):
            run.attempt_started_at = run.attempt_started_at - timedelta(seconds=seconds)
            if alive:
                session.execute(update(Run).where(Run.id == run.id).values(last_event_at=utcnow()))
            elif run.last_event_at is not None:
                session.execute(update(Run).where(Run.id == run.id).values(
                    last_event_at=run.last_event_at - timedelta(seconds=seconds)))
