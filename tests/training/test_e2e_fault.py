"""Fault test: the training process is killed with SIGKILL mid-run, and its local run folder is lost with it
(as when a node dies). Lanner marks the run lost, relaunches it with resume from the checkpoint the worker
uploaded, and the run completes with every epoch once in its history; the charge covers only the time the
attempts actually ran. With blobs in a bucket (moto's S3 server) the same, and the worker's checkpoint goes
straight into the bucket (its own presigned PUT, confirmed to the server), never through the API host."""

from __future__ import annotations

import os
import shutil
import signal
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pytest
from ultralytics_platform import Platform

from tests.servers import wait_for
from tests.storage.moto import moto_server, new_bucket, s3_env
from tests.training.orchestration import (
    TRAIN_ARGS,
    add_dataset,
    balance_micros,
    job,
    new_model,
    run_ledger,
    server_with_credit,
    settled,
)

pytestmark = pytest.mark.e2e
EPOCHS = 8


def trainer_process(workdir: Path) -> psutil.Process | None:
    for process in psutil.process_iter(["cmdline", "cwd"]):
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
            if process.info["cwd"] == str(workdir) and "yolo" in cmdline and " train" in cmdline:
                return process
        except psutil.Error:
            continue
    return None


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize("store", ["local", "s3"])
def test_sigkilled_worker_is_relaunched_with_resume_and_billed_only_for_time_run(tmp_path, store):
    with ExitStack() as stack:
        bucket_env: dict[str, str] = {}
        if store == "s3":
            endpoint = stack.enter_context(moto_server(tmp_path / "moto.log"))
            bucket = new_bucket(endpoint)
            bucket_env = s3_env(endpoint, bucket)
        server, key = server_with_credit(tmp_path, LANNER_CHECKPOINT_UPLOAD_SECONDS="1", **bucket_env)
        stack.callback(server.stop)
        _killed_and_resumed(tmp_path, server, key)
        if store == "s3":
            requests = (tmp_path / "moto.log").read_text().splitlines()
            staged = [line for line in requests if f"PUT /{bucket}/lanner/staging/checkpoints/" in line]
            assert staged and all(" 200 " in line for line in staged), requests[-20:]  # the worker's own PUTs


def _killed_and_resumed(tmp_path: Path, server: Any, key: str) -> None:
    """SIGKILL the trainer after two epochs and an uploaded checkpoint, lose its folder, and check the relaunch
    resumed from the upload, with every epoch once and only the time run billed."""
    platform = Platform(base_url=server.url, api_key=key, timeout=60)
    add_dataset(tmp_path, platform, train=48)  # epochs of about 1.5 s: time to kill one mid-run
    target = new_model(platform, "faults", "killed")
    before = balance_micros(platform)
    started = platform.training.start(model_id=target["id"], gpu_type="cpu",
                                      train_args={**TRAIN_ARGS, "epochs": EPOCHS})
    workdir = server.home / "runs" / str(started["runId"]) / "work"

    first_log = server.home / "runs" / str(started["runId"]) / "attempt-1.log"
    wait_for(lambda: job(platform, "faults", "killed")["progress"]["currentEpoch"] >= 2
             and "uploaded the resume checkpoint" in first_log.read_text(), timeout=300,
             what="two epochs and an uploaded checkpoint", every=0.3)
    process = trainer_process(workdir)
    assert process is not None
    os.kill(process.pid, signal.SIGKILL)
    # kill() only queues the signal: a write in flight finishes first, so wait for the process to be gone
    gone, alive = psutil.wait_procs([process], timeout=30)
    assert not alive, "the SIGKILLed trainer is still alive"
    shutil.rmtree(workdir / "runs")  # the node's copy is gone: the relaunch must use the uploaded checkpoint

    done = wait_for(lambda: (j := job(platform, "faults", "killed"))["status"] in ("completed", "failed") and j,
                    timeout=400, what="the relaunched run to finish", every=1)
    log = (server.home / "runs" / str(started["runId"]) / "attempt-2.log")
    assert done["status"] == "completed", log.read_text()[-3000:] if log.exists() else done
    assert "fetched the run's uploaded one" in log.read_text() and "resumes from" in log.read_text()

    model = wait_for(lambda: settled(platform, "faults", "killed"), timeout=60, what="settlement")
    epochs = [r["epoch"] for r in model["trainResults"]]
    assert epochs == list(range(EPOCHS))  # every epoch once, one continuous history
    history = model["runHistory"]
    lost = [h for h in history if h["to"] == "lost"]
    assert len(lost) == 1 and "signal 9" in lost[0]["reason"]
    assert [h["to"] for h in history][-3:] == ["starting", "running", "completed"]

    # Billed: attempt 1 up to its last sign of life, attempt 2 from launch to completion; not the gap.
    launches = [at(h["at"]) for h in history if h["to"] == "starting"]
    assert len(launches) == 2
    wall = (at(history[-1]["at"]) - launches[0]).total_seconds()
    gap = (launches[1] - at(lost[0]["at"])).total_seconds()
    billed = model["computeCost"]["durationMs"] / 1000
    assert billed <= wall - gap + 1
    cost = round(model["computeCost"]["totalCost"] * 1_000_000)
    assert cost == -(-model["computeCost"]["billedSeconds"] * 500_000 // 3600)
    ledger = run_ledger(platform, started["runId"])
    assert -sum(ledger["charge"]) - sum(ledger.get("refund", [])) == cost
    assert before - balance_micros(platform) == cost
