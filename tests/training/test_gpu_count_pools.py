"""Several GPUs in one run with ``LANNER_POOLS``: a run's GPUs all come on one node, so a pool's ``gpus_per_node``
bounds its count; a pool's room and the devices a waiting run may take count GPUs, not runs."""

from __future__ import annotations

from typing import Any

import pytest

from lanner.training.executors import Capacity
from lanner.training.executors.ray import RayExecutor
from tests.training.conftest import ARGS, new_model
from tests.training.test_pools import POOLS, PooledExecutor
from tests.training.test_start_api import credit
from tests.training.test_supervisor import run_row


class PooledRay(PooledExecutor):
    most_devices = RayExecutor.most_devices  # Ray's own rule, over the pools this executor declares


@pytest.fixture
def settings(settings: Any) -> Any:
    """Runs record the configured executor's name: the same as the executor the supervisor counts them by."""
    return settings.model_copy(update={"executor": "ray", "ray_address": "http://127.0.0.1:1"})


@pytest.fixture
def pooled(app: Any) -> PooledRay:
    executor = PooledRay(POOLS)  # h100-sxm: one node of 2 GPUs at most
    app.state.training.use_executor(executor)
    return executor


def start(client: Any, account: Any, model_id: str, count: int) -> Any:
    return client.post("/api/training/start", headers=account.headers, json={
        "modelId": model_id, "gpuType": "h100-sxm", "gpuCount": count, "trainArgs": ARGS})


def test_ray_bounds_the_count_by_a_pools_node_and_knows_no_limit_without_one():
    ray = RayExecutor("http://head:8265", pools=lambda: POOLS)
    assert ray.most_devices("h100-sxm") == 2 and ray.most_devices("l40s") is None
    assert RayExecutor("http://head:8265").most_devices("h100-sxm") is None


def test_a_pool_counts_gpus_as_room_and_as_devices_a_waiting_run_may_take(shapes, app, alice, client, pooled):
    credit(app, alice, 100_000_000)
    refused = start(client, alice, new_model(shapes, "three"), 3)
    assert refused.status_code == 422 and refused.json()["gpuCountAvailable"] == 2
    assert refused.json()["error"] == "gpuCount: this server has 2 NVIDIA H100 SXM5 on one machine, not 3"

    pooled.nodes["h100-sxm"] = Capacity(total=1, free=1)  # a node with one GPU is up: not enough for a pair
    pair = start(client, alice, new_model(shapes, "pair"), 2).json()["runId"]
    supervisor = app.state.training.supervisor
    supervisor.run_once()
    assert [spec.gpu_count for spec in pooled.launched] == [2]
    assert run_row(app, pair).status == "provisioning"  # it waits for a node with two

    single = start(client, alice, new_model(shapes, "single"), 1).json()["runId"]
    supervisor.run_once()  # the pool's one node of two GPUs is the pair's: the single run waits
    assert len(pooled.launched) == 1 and run_row(app, single).external_id is None


def test_availability_counts_a_runs_gpus_not_the_run(shapes, app, alice, client, pooled):
    """One run on both GPUs of the pool's only node fills the pool: no type is 'on demand' while it runs (it was
    counted as one busy device of two, so the dialog offered a node that cannot come)."""
    credit(app, alice, 100_000_000)
    start(client, alice, new_model(shapes, "pair"), 2)
    app.state.training.supervisor.run_once()
    assert [spec.gpu_count for spec in pooled.launched] == [2]
    detail = client.get("/api/training/gpu-availability", params={"detail": "true"}).json()["h100-sxm"]
    assert detail["text"] == "queued: all busy" and detail["level"] == "Low"
