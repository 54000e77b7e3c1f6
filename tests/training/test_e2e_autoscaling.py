"""GPUs on demand, end to end, on Ray's autoscaler with simulated nodes (``tests/ray_autoscaling.py``): a head
without GPUs and three node types that start at zero, declared to Lanner as pools (``LANNER_POOLS``, checked by
``lanner pools check`` against the very config the autoscaler runs). The real server, the real SDK, the real
trainer (on the CPU inside each simulated node) and the real browser:

- the train dialog and ``training.gpu_availability`` say "on demand", with the start-up time;
- a run on h100 goes provisioning -> running -> completed on a node launched from zero, released when idle;
- a second run on the warm node skips provisioning;
- three runs on the one-node rtx-4090 pool run one after another, each charged only for its own training;
- a pool whose nodes never come fails its run at the start timeout, with nothing charged;
- killing a node's raylet mid-run (a spot preemption) resumes the run on a new node, every epoch once."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from ultralytics_platform import Platform

from tests.ray_autoscaling import autoscaling_ray, node_types  # noqa: F401  (the fixture)
from tests.servers import VENV_BIN, lanner_env, wait_for
from tests.training.orchestration import TRAIN_ARGS, add_dataset, job, new_model, server_with_credit, settled

pytestmark = pytest.mark.e2e
ray = pytest.importorskip("ray")

NODE = {"CPU": 1}
CLUSTER = {
    "h100": {"resources": {**NODE, "lanner-gpu:h100-sxm": 1}, "max_workers": 2},
    "rtx-4090": {"resources": {**NODE, "lanner-gpu:rtx-4090": 1}, "max_workers": 1},
    # A cloud without capacity: every launch of this type is refused, so its runs wait until the timeout.
    "a100": {"resources": {**NODE, "lanner-gpu:a100-80gb-sxm": 1}, "max_workers": 1,
             "node_config": {"launch_error": "InsufficientInstanceCapacity"}},
}
IDLE_MINUTES = 0.5
SPOT_EPOCHS = 6


def pools_file(tmp_path: Path, cluster_config: Path) -> Path:
    common = {"gpus_per_node": 1, "vcpus": 1, "ram_gib": 1, "idle_timeout_minutes": IDLE_MINUTES,
              "typical_start_minutes": 0.5}
    pools = {"cluster": str(cluster_config), "pools": [
        {"name": "h100", "gpu": "h100-sxm", "max_nodes": 2, "cost_per_node_hour": 2.0, "start_timeout_minutes": 4,
         **common},
        {"name": "rtx-4090", "gpu": "rtx-4090", "max_nodes": 1, "cost_per_node_hour": 0.3,
         "start_timeout_minutes": 4, **common},
        {"name": "a100", "gpu": "a100-80gb-sxm", "max_nodes": 1, "cost_per_node_hour": 1.0,
         "start_timeout_minutes": 0.5, **common}]}
    path = tmp_path / "pools.json"
    path.write_text(json.dumps(pools))
    return path


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def history(platform: Platform, model: str) -> list[dict[str, Any]]:
    return platform.models.retrieve("alice", "gpus", model)["model"].get("runHistory") or []


def done(platform: Platform, model: str, timeout: float = 420) -> dict[str, Any]:
    return wait_for(lambda: (j := job(platform, "gpus", model))["status"] in ("completed", "failed", "cancelled")
                    and j, timeout=timeout, what=f"run {model} to end", every=1)


def start(platform: Platform, model: str, gpu: str, epochs: int) -> dict[str, Any]:
    return platform.training.start(model_id=new_model(platform, "gpus", model)["id"], gpu_type=gpu,
                                   train_args={**TRAIN_ARGS, "epochs": epochs})


def nodes_of(cluster: Any, gpu: str) -> list[Any]:
    return [n for n in cluster.worker_nodes() if f"lanner-gpu:{gpu}" in n.resources]


def ray_job_of(cluster: Any, run_id: int) -> Any:
    """The Ray job of the run's current attempt (its submission id names the run)."""
    from ray.job_submission import JobSubmissionClient

    jobs = [j for j in JobSubmissionClient(cluster.address).list_jobs()
            if (j.submission_id or "").startswith(f"lanner-run-{run_id}-") and str(j.status).endswith("RUNNING")]
    return jobs[0] if jobs else None


@node_types(CLUSTER, idle_timeout_minutes=IDLE_MINUTES)
def test_pools_bring_nodes_up_on_demand_and_let_them_go(tmp_path, autoscaling_ray):  # noqa: F811
    cluster = autoscaling_ray
    pools = pools_file(tmp_path, cluster.config_path)
    settings = {"LANNER_EXECUTOR": "ray", "LANNER_RAY_ADDRESS": cluster.address, "LANNER_RAY_NUM_GPUS": "0",
                "LANNER_RAY_WORKER_DIR": str(tmp_path / "nodes"), "LANNER_POOLS": str(pools),
                "LANNER_CHECKPOINT_UPLOAD_SECONDS": "1"}
    checked = subprocess.run([str(VENV_BIN / "lanner"), "pools", "check"], capture_output=True, text=True,
                             env=lanner_env(tmp_path / "check-home", **settings), check=False)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == f"3 pool(s) OK, checked against the catalogue and {cluster.config_path.name}"
    assert not cluster.worker_nodes()  # nothing up: every pool starts at zero

    server, key = server_with_credit(tmp_path, usd="50", **settings)
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        add_dataset(tmp_path, platform, train=32)
        levels = platform.training.gpu_availability()
        assert levels["h100-sxm"] == "Medium" and levels["rtx-4090"] == "Medium" and levels["l4"] is None
        dialog_says(server, tmp_path)
        estimated = subprocess.run(  # the operator's command line says it too
            [str(VENV_BIN / "lanner"), "estimate", "--model", "yolo11n.yaml", "--data", "ul://alice/datasets/shapes",
             "--epochs", "2", "--imgsz", "128", "--batch", "8"], capture_output=True, text=True, check=False,
            env={**lanner_env(server.home, **settings), "COLUMNS": "80"})  # 80: the table without borders
        assert estimated.returncode == 0, estimated.stderr
        rows = {line.split()[0]: line for line in estimated.stdout.splitlines() if line.strip()}
        assert "h100-sxm" in rows, estimated.stdout
        assert rows["h100-sxm"].rstrip().endswith("on demand, about 1 min"), estimated.stdout
        assert rows["l4"].rstrip().endswith("not offered"), estimated.stdout

        # Everything at once: one h100 run, three runs for the one-node rtx-4090 pool, one for the a100 pool.
        start(platform, "h100-first", "h100-sxm", epochs=2)
        for i in range(3):
            start(platform, f"rtx-{i}", "rtx-4090", epochs=1)
        start(platform, "a100-never", "a100-80gb-sxm", epochs=1)

        waiting = wait_for(lambda: (j := job(platform, "gpus", "h100-first")).get("provisioning") and j,
                           timeout=60, what="the h100 run to wait for its node")
        assert waiting["status"] == "pending" and waiting["provisioning"]["pool"] == "h100"
        assert waiting["provisioning"]["typicalStartSeconds"] == 30.0
        wait_for(lambda: nodes_of(cluster, "h100-sxm"), timeout=120, what="an h100 node launched from zero")

        ended = done(platform, "h100-first")
        assert ended["status"] == "completed", ended
        steps = [h["to"] for h in history(platform, "h100-first")]
        assert steps[:3] == ["pending", "provisioning", "starting"] and steps[-1] == "completed", steps

        # The node is warm (its job gone, the node not yet idle long enough to go): the availability says so,
        # and a run started now takes it without provisioning.
        wait_for(lambda: detail(server, "h100-sxm")["text"] == "free now", timeout=60, what="the h100 node free")
        start(platform, "h100-warm", "h100-sxm", epochs=1)
        assert done(platform, "h100-warm")["status"] == "completed"
        assert "provisioning" not in [h["to"] for h in history(platform, "h100-warm")]

        # A spot node preempted mid-run (its raylet and everything under it killed): the run is lost, goes back
        # to its pool (a new node), resumes from the checkpoint it uploaded; every epoch once in its history.
        spot = start(platform, "h100-spot", "h100-sxm", epochs=SPOT_EPOCHS)
        ray_job = wait_for(lambda: job(platform, "gpus", "h100-spot")["progress"].get("currentEpoch", 0) >= 2
                           and ray_job_of(cluster, spot["runId"]), timeout=300, what="two epochs on a node", every=0.5)
        wait_for(lambda: "uploaded the resume checkpoint" in job_logs(cluster, ray_job.submission_id), timeout=60,
                 what="a resume checkpoint uploaded")
        cluster.kill_raylet(ray_job.driver_node_id)
        resumed = done(platform, "h100-spot", timeout=600)
        assert resumed["status"] == "completed", resumed
        model = wait_for(lambda: settled(platform, "gpus", "h100-spot"), timeout=60, what="settlement")
        assert [r["epoch"] for r in model["trainResults"]] == list(range(SPOT_EPOCHS))
        steps = [h["to"] for h in model["runHistory"]]
        assert "lost" in steps and steps.count("starting") == 2 and steps[-1] == "completed", steps
        # Charged once: the first attempt up to its last sign of life, the second from its start; not the time
        # between (the lost node, the new node coming up).
        launches = [at(h["at"]) for h in model["runHistory"] if h["to"] == "starting"]
        lost = next(at(h["at"]) for h in model["runHistory"] if h["to"] == "lost")
        wall = (at(model["runHistory"][-1]["at"]) - launches[0]).total_seconds()
        assert model["computeCost"]["durationMs"] / 1000 <= wall - (launches[1] - lost).total_seconds() + 1

        # The a100 pool never delivers: failed at its 30 s start timeout, nothing charged.
        failed = done(platform, "a100-never", timeout=240)
        assert failed["status"] == "failed" and failed["error"]["code"] == "provisioning_timeout", failed
        assert (settled(platform, "gpus", "a100-never") or {}).get("computeCost", {}).get("totalCost", 0) == 0

        # The one-node pool: its three runs one after another (never two training at once), each charged for
        # its own training time only, not for the wait.
        spans = []
        for i in range(3):
            assert done(platform, f"rtx-{i}")["status"] == "completed"
            model = wait_for(lambda i=i: settled(platform, "gpus", f"rtx-{i}"), timeout=60, what="settlement")
            steps = model["runHistory"]
            began = at(next(h["at"] for h in steps if h["to"] == "starting"))
            spans.append((began, at(steps[-1]["at"])))
            billed = model["computeCost"]["durationMs"] / 1000
            assert billed <= (spans[-1][1] - began).total_seconds() + 1
            price = round(model["computeCost"]["pricePerHour"] * 1_000_000)
            assert round(model["computeCost"]["totalCost"] * 1_000_000) == -(
                -model["computeCost"]["billedSeconds"] * price // 3600)
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans

        # Idle long enough, the h100 node goes.
        wait_for(lambda: not nodes_of(cluster, "h100-sxm"), timeout=IDLE_MINUTES * 60 + 120,
                 what="the idle h100 node to be released")
    finally:
        server.stop()


def detail(server: Any, gpu: str) -> dict[str, Any]:
    import httpx

    return httpx.get(f"{server.url}/api/training/gpu-availability", params={"detail": "true"}, timeout=30).json()[gpu]


def job_logs(cluster: Any, submission_id: str) -> str:
    from ray.job_submission import JobSubmissionClient

    return str(JobSubmissionClient(cluster.address).get_job_logs(submission_id))


def dialog_says(server: Any, tmp_path: Path) -> None:
    """The train dialog, in chromium, signed in as alice: the h100 row says on demand, with the start-up."""
    from playwright.sync_api import sync_playwright

    subprocess.run([str(VENV_BIN / "lanner"), "users", "set-password", "alice"], input="correct horse battery\n",
                   text=True, capture_output=True, env=lanner_env(server.home), check=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(base_url=server.url, viewport={"width": 1280, "height": 900})
            page.goto("/login?next=/train")
            page.get_by_label("Username").fill("alice")
            page.get_by_label("Password").fill("correct horse battery")
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url("**/train*")
            page.goto("/train?dataset=ul://alice/datasets/shapes&epochs=2&imgsz=128")
            row = page.locator('tr[data-gpu="h100-sxm"] td.availability')
            text = " ".join(row.inner_text().split())
            assert text.startswith("on demand, about 1 min") and "with start-up" in text, text
            if os.environ.get("LANNER_SCREENSHOTS"):
                page.screenshot(path=str(tmp_path / "train-on-demand.png"), full_page=True)
        finally:
            browser.close()
