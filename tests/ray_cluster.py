"""A real local Ray head for the tests that run on the distributed engine (training, exports and dedicated
endpoints), started and stopped by the test: ``ray start --head`` with one fake H100 and 2 CPUs, in a short
temporary folder (Ray's socket paths must stay short). The fixture yields the dashboard's address (Ray Jobs and
the Serve API); import it into a test module to use it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.servers import VENV_BIN, free_port

LOCK = "/tmp/lanner-tests-ray-head.lock"


def _reports_resources(address: str) -> bool:
    try:
        return "lanner-gpu:h100-sxm" in str(httpx.get(f"{address}/api/cluster_status", timeout=5).json())
    except (httpx.HTTPError, ValueError):
        return False


@pytest.fixture
def ray_head() -> Iterator[str]:
    """``ray start --head`` with one fake H100; yields ``http://127.0.0.1:<dashboard port>``. One at a time on
    this machine (``make test`` runs two pytest workers, and ``ray stop --force`` stops every head)."""
    yield from _locked_head()


@pytest.fixture(scope="module")
def ray_head_for_module() -> Iterator[str]:
    """``ray_head`` for a whole test module (a module-scoped server that reads the cluster needs it)."""
    yield from _locked_head()


@pytest.fixture
def ray_head_with_cpu() -> Iterator[str]:
    """``ray_head`` whose node also takes CPU jobs, as docs/deploy-gpus.md's head does: it offers
    ``lanner-gpu:cpu`` (3) beside the fake H100, with 4 logical CPUs."""
    yield from _locked_head({"lanner-gpu:h100-sxm": 1, "lanner-gpu:cpu": 3}, cpus=4)


def _locked_head(resources: dict[str, int] | None = None, cpus: int = 2) -> Iterator[str]:
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from _ray_head(resources or {"lanner-gpu:h100-sxm": 1}, cpus)


def _ray_head(resources: dict[str, int], cpus: int) -> Iterator[str]:
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    dashboard = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LANNER_", "RAY_"))}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["RAY_JOB_START_TIMEOUT_SECONDS"] = "15"  # queued jobs expire quickly, so the resubmission is exercised
    command = [str(VENV_BIN / "ray"), "start", "--head", f"--port={free_port()}", f"--num-cpus={cpus}",
               f"--dashboard-port={dashboard}", "--dashboard-host=127.0.0.1", "--include-dashboard=true",
               f"--temp-dir={temp}", "--resources", json.dumps(resources), "--disable-usage-stats"]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=120)
    address = f"http://127.0.0.1:{dashboard}"
    deadline = time.time() + 60
    while not _reports_resources(address):
        if time.time() > deadline:
            raise AssertionError("timed out waiting for the Ray head to report its resources")
        time.sleep(0.5)
    try:
        yield address
    finally:
        subprocess.run([str(VENV_BIN / "ray"), "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)
