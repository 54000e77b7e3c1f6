"""``make run PORT=... HOST=...``: the demo and the server on the port asked for, the demo's links naming it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.conftest import REPOSITORY
from tests.servers import VENV_BIN, free_port, lanner_env


def test_make_run_serves_on_the_port_given(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "make.log"
    env = lanner_env(tmp_path / "home")
    env.pop("LANNER_PUBLIC_URL", None)
    # The venv this test runs in (-o: never reinstall it), this checkout's package (PYTHONPATH, as the tests run).
    process = subprocess.Popen(["make", "-s", "-o", ".venv/.lanner-installed", "run", f"PORT={port}",
                                "HOST=127.0.0.1", f"BIN={VENV_BIN}"], cwd=REPOSITORY, env=env,
                               stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise AssertionError(f"not served on {port}: {log.read_text()}")
        printed = log.read_text()
        assert f"Demo workspace ready at http://127.0.0.1:{port}" in printed
        assert f"export ULTRALYTICS_PLATFORM_URL=http://127.0.0.1:{port} " in printed
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
