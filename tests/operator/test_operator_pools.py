"""``GET /api/operator/pools`` and ``GET /api/operator/metrics`` with a pool whose runs go through the supervisor
(``tests/training/test_pools.py``'s scripted Ray): the figures now (nodes up, runs by state, the measured start),
node-hours from the sampler times the pool's price, credits from the ledger rows of the runs the supervisor
charged (a refund netted, a charge three days ago on its day, one 40 days ago only in the all-time counter), the
margin; the Prometheus text parses to the same values; anyone but a server admin gets 403."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from lanner.accounts.dependencies import require_admin
from lanner.accounts.principal import Principal
from lanner.billing import service as billing
from lanner.db import utcnow
from lanner.errors import Forbidden
from lanner.training import pool_usage
from lanner.training.executors import Capacity, JobState
from lanner.training.models import PoolLaunch, PoolUsage
from tests.ledger import DOLLAR, make_run, spend_on
from tests.training.conftest import new_model
from tests.training.test_pools import POOLS, PooledExecutor, start
from tests.training.test_start_api import backdate, credit
from tests.training.test_supervisor import run_row

SAMPLE_EVERY = 100  # seconds between the sampler's calls (under its two-minute cap)


@pytest.fixture
def root(make_account: Any) -> Any:
    return make_account("root", admin=True)


@pytest.fixture
def pooled(app: Any) -> PooledExecutor:
    executor = PooledExecutor(POOLS)
    app.state.training.use_executor(executor)
    return executor


def sample_an_hour_of_one_node(app: Any) -> None:
    """The sampler as the supervisor calls it, every 100 s over an hour that ended two hours ago: one node up
    (2 H100s, 2 per node)."""
    begin = utcnow() - timedelta(hours=3)
    with app.state.lanner.db.session() as session:
        for step in range(3600 // SAMPLE_EVERY + 1):
            pool_usage.sample(session, POOLS, {"h100-sxm": Capacity(total=2, free=0)},
                              begin + timedelta(seconds=step * SAMPLE_EVERY))


def busy_pool(app: Any, client: Any, alice: Any, shapes: Any, pooled: PooledExecutor) -> dict[str, int]:
    """Three runs on the pool (one node of 2 GPUs at most): the first placed on its node and charged an hour, the
    second still waiting for a node, the third queued (the pool is full; a device is free, so it is not waiting
    for a node)."""
    credit(app, alice, 50 * DOLLAR)
    supervisor = app.state.training.supervisor
    first = start(client, alice, new_model(shapes, "first"))
    second = start(client, alice, new_model(shapes, "second"))
    supervisor.run_once()
    pooled.nodes["h100-sxm"] = Capacity(total=2, free=1)
    pooled.set(first, 1, JobState.RUNNING)
    supervisor.run_once()
    third = start(client, alice, new_model(shapes, "third"))
    supervisor.run_once()
    backdate(app, seconds=3600, alive=True)
    supervisor.run_once()  # metering: an hour of the first run
    assert [run_row(app, r).status for r in (first, second, third)] == ["starting", "provisioning", "pending"]
    return {"first": first, "second": second, "third": third}


def test_the_pools_answer_adds_up_cost_credits_and_margin_per_day(app, client, alice, root, shapes, pooled):
    sample_an_hour_of_one_node(app)
    runs = busy_pool(app, client, alice, shapes, pooled)
    with app.state.lanner.db.session() as session:
        charged_now = billing.run_charged(session, runs["first"])
        billing.refund_run_to(session, user_id=alice.user_id, run_id=runs["first"], reason="Refund: test",
                              target_micros=charged_now - DOLLAR // 10, gpu_type="h100-sxm")  # 10 cents back,
        # as the supervisor's refunds are written (charging.refund_excess: the run's GPU type on the row)
        node_seconds = session.scalar(select(func.sum(PoolUsage.node_seconds)))
        wait = session.scalar(select(PoolLaunch.seconds).where(PoolLaunch.outcome == "up"))
    assert charged_now > 3 * DOLLAR  # an hour at $3.29
    run_id, model_id = make_run(app.state.lanner.db, alice.user_id, model="older", gpu="h100-sxm")
    spend_on(app.state.lanner.db, alice.user_id, run_id, model_id, hold=2 * DOLLAR, charge=DOLLAR + DOLLAR // 2,
             gpu="h100-sxm", at=utcnow() - timedelta(days=3))
    run_id, model_id = make_run(app.state.lanner.db, alice.user_id, model="oldest", gpu="h100-sxm")
    spend_on(app.state.lanner.db, alice.user_id, run_id, model_id, hold=DOLLAR, charge=DOLLAR, gpu="h100-sxm",
             at=utcnow() - timedelta(days=40))

    answer = client.get("/api/operator/pools", headers=root.headers)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["currency"] == "USD" and body["note"] is None
    [pool] = body["pools"]
    assert {k: pool[k] for k in ("name", "gpuType", "gpusPerNode", "maxNodes", "spot", "costPerNodeHour",
                                 "startTimeoutMinutes", "typicalStartMinutes")} == {
        "name": "h100", "gpuType": "h100-sxm", "gpusPerNode": 2, "maxNodes": 1, "spot": False,
        "costPerNodeHour": 5.0, "startTimeoutMinutes": 10.0, "typicalStartMinutes": 3.0}
    assert pool["creditsPerNodeHour"] == pytest.approx(2 * 3.29)  # the catalogue's price of 2 H100s
    assert (pool["nodesUp"], pool["devicesUp"], pool["devicesFree"]) == (1, 2, 1)
    assert pool["runs"] == {"provisioning": 1, "running": 1, "queued": 1}
    assert pool["typicalStart"] == {"seconds": round(wait, 1), "measured": 1}

    days = pool["days"]
    assert len(days) == 30 and days[-1]["day"] == utcnow().date().isoformat()
    hours = sum(day["nodeHours"] for day in days)
    assert hours == pytest.approx(node_seconds / 3600, abs=1e-3)
    assert 1.0 <= hours < 1.05  # the sampled hour (passes of the supervisor add seconds, if any)
    for day in days:
        assert day["costDollars"] == pytest.approx(day["nodeHours"] * 5.0, abs=1e-3)
        assert day["marginDollars"] == pytest.approx(day["creditsDollars"] - day["costDollars"], abs=1e-6)
    by_day = {day["day"]: day for day in days}
    assert by_day[utcnow().date().isoformat()]["creditsDollars"] == pytest.approx((charged_now - DOLLAR // 10) / DOLLAR)
    assert by_day[(utcnow() - timedelta(days=3)).date().isoformat()]["creditsDollars"] == 1.5
    total = pool["lastDays"]
    assert total["creditsDollars"] == pytest.approx((charged_now - DOLLAR // 10) / DOLLAR + 1.5)  # not 40 days ago
    assert total["costDollars"] == pytest.approx(hours * 5.0, abs=1e-3)
    assert total["marginDollars"] == pytest.approx(total["creditsDollars"] - total["costDollars"], abs=1e-6)
    assert body["days"] == days  # one pool: the totals per day are its days

    metrics = client.get("/api/operator/metrics", headers=root.headers)
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(metrics.text) for s in family.samples}
    assert found[("lanner_pool_nodes_up", (("gpu", "h100-sxm"), ("pool", "h100")))] == 1
    assert found[("lanner_pool_max_nodes", (("pool", "h100"),))] == 1
    for state, count in pool["runs"].items():
        assert found[("lanner_pool_runs", (("pool", "h100"), ("state", state)))] == count
    assert found[("lanner_pool_start_seconds", (("pool", "h100"),))] == pytest.approx(wait)
    assert found[("lanner_pool_node_hours_total", (("pool", "h100"),))] == pytest.approx(hours, abs=1e-3)
    assert found[("lanner_pool_cost_dollars_total", (("pool", "h100"),))] == pytest.approx(hours * 5.0, abs=1e-3)
    assert found[("lanner_pool_credits_dollars_total", (("pool", "h100"),))] == pytest.approx(
        total["creditsDollars"] + 1.0)  # and the charge of 40 days ago


def test_without_pools_the_answer_says_how_to_declare_them(client, root, fake_executor):
    body = client.get("/api/operator/pools", headers=root.headers).json()
    assert body["pools"] == [] and body["days"] == []
    assert "LANNER_POOLS" in body["note"] and "docs/deploy-gpus.md" in body["note"]
    metrics = client.get("/api/operator/metrics", headers=root.headers)
    assert metrics.status_code == 200 and list(text_string_to_metric_families(metrics.text))


@pytest.mark.parametrize("path", ["/api/operator/pools", "/api/operator/metrics"])
def test_anyone_but_a_server_admin_is_refused(client, alice, path, fake_executor):
    refused = client.get(path, headers=alice.headers)
    assert refused.status_code == 403
    assert refused.json()["code"] == "admin_required" and "lanner users create" in refused.json()["error"]
    assert client.get(path).status_code == 401


def test_a_workers_key_is_no_admin_whoever_started_the_run():
    admin = Principal(user_id="u1", username="root", tier="pro", key_id="k1", is_admin=True)
    assert require_admin(admin) is admin
    with pytest.raises(Forbidden):
        require_admin(Principal(user_id="u1", username="root", tier="pro", key_id="k2", run_id=7, is_admin=True))
