"""End to end on a real local Ray head standing in for a GPU node: it offers ``lanner-gpu:h100-sxm``, so a run
for ``h100-sxm`` runs there through Ray Jobs, and a run for ``b200`` stays pending (no node offers it)."""

from __future__ import annotations

import time

import httpx
import pytest
from ultralytics_platform import Platform

from tests.ray_cluster import ray_head  # noqa: F401  (the fixture)
from tests.servers import wait_for
from tests.training.orchestration import (
    TRAIN_ARGS,
    add_dataset,
    job,
    new_model,
    server_with_credit,
    settled,
)

pytestmark = pytest.mark.e2e
ray = pytest.importorskip("ray")


def test_runs_go_through_ray_jobs_and_wait_for_a_node_with_their_gpu(tmp_path, ray_head):  # noqa: F811
    server, key = server_with_credit(tmp_path, usd="50", tier="pro", LANNER_EXECUTOR="ray",
                                     LANNER_RAY_ADDRESS=ray_head, LANNER_RAY_NUM_GPUS="0",
                                     LANNER_RAY_WORKER_DIR=str(tmp_path / "ray-node"))
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        add_dataset(tmp_path, platform)
        availability = platform.training.gpu_availability()
        assert availability["h100-sxm"] == "High" and availability["b200"] is None

        waiting = platform.training.start(model_id=new_model(platform, "ray", "on-b200")["id"], gpu_type="b200",
                                          train_args={**TRAIN_ARGS, "epochs": 1})
        started = platform.training.start(model_id=new_model(platform, "ray", "on-h100")["id"],
                                          gpu_type="h100-sxm", train_args={**TRAIN_ARGS, "epochs": 2})
        assert started["gpuType"] == "h100-sxm" and started["estimatedCost"]["gpuMemoryGb"] == 80

        done = wait_for(lambda: (j := job(platform, "ray", "on-h100"))["status"] in ("completed", "failed") and j,
                        timeout=400, what="the Ray run to finish", every=1)
        assert done["status"] == "completed", done
        assert done["compute"]["gpuType"] == "h100-sxm"
        model = wait_for(lambda: settled(platform, "ray", "on-h100"), timeout=60, what="settlement")
        assert model["hasWeights"] and len(model["trainResults"]) == 2
        assert model["computeCost"]["totalCost"] > 0
        assert list((tmp_path / "ray-node" / str(started["runId"])).rglob("weights/best.pt"))  # ran on the node

        from ray.job_submission import JobSubmissionClient

        def ray_jobs() -> dict[str, str]:
            return {j.submission_id: str(j.status) for j in JobSubmissionClient(ray_head).list_jobs()}

        ran = f"lanner-run-{started['runId']}-attempt-1-"

        def statuses(prefix: str, jobs: dict[str, str]) -> list[str]:
            return [status.rsplit(".", 1)[-1] for submission, status in jobs.items() if submission.startswith(prefix)]

        wait_for(lambda: "SUCCEEDED" in statuses(ran, ray_jobs()), timeout=60, what="the Ray job to exit")
        # Ray gives up on a queued job after RAY_JOB_START_TIMEOUT_SECONDS (15 s here); Lanner submits it again
        # (same attempt: waiting is not a lost attempt), so a job for the B200 run is always queued.
        queued = f"lanner-run-{waiting['runId']}-attempt-1-"
        waited = wait_for(lambda: {"FAILED", "PENDING"} <= set(found := statuses(queued, ray_jobs())) and found,
                          timeout=60, what="an expired and a resubmitted B200 job")
        assert set(waited) == {"FAILED", "PENDING"}, waited
        assert job(platform, "ray", "on-b200")["status"] == "pending"  # still waiting for a B200 node

        # An export of the trained model goes through Ray Jobs too, on the type it names (here the "H100" node).
        export = platform.exports.create("alice", "ray", "on-h100", format="torchscript", gpu_type="h100-sxm",
                                         args={"imgsz": 64})
        exported = wait_for(lambda: (e := platform.exports.retrieve("alice", "ray", "on-h100", export["id"])["export"])
                            ["status"] in ("completed", "failed") and e, timeout=300, what="the Ray export", every=1)
        assert exported["status"] == "completed", exported.get("error")
        assert any(s.startswith(f"lanner-run-{export['id']}-attempt-") for s in ray_jobs()), ray_jobs()
        artefact = httpx.get(exported["file"]["downloadUrl"], timeout=60)
        assert artefact.status_code == 200 and len(artefact.content) == exported["file"]["size"]

        platform.models.delete_training("alice", "ray", "on-b200")
        cancelled = wait_for(lambda: settled(platform, "ray", "on-b200"), timeout=30, what="the cancel to settle")
        assert cancelled["computeCost"]["totalCost"] == 0  # never ran, never charged
        assert platform.billing.usage_summary()["heldCents"] == 0
    finally:
        server.stop()
        time.sleep(0.5)
