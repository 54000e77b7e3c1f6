"""A dedicated endpoint on the real ``lanner serve`` with the local executor: its serving process is killed with
SIGKILL and the deployment is ``ready`` again by itself (the reason in its log); deleting it ends the process
(its pid is gone). The official SDK talks to the server over HTTP, as a user's program would."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
from ultralytics_platform import Platform

from lanner.config import Settings
from lanner.context import AppContext
from tests.deployments.conftest import IMGSZ, image_file, wait_status
from tests.servers import lanner_cli, start_server, wait_for
from tests.trained import attach_weights

pytestmark = pytest.mark.e2e


def server_context(home: Path, url: str) -> Any:
    """What ``attach_weights`` needs of an app, for a server running in another process (its database and
    blob store are on this machine)."""
    return SimpleNamespace(state=SimpleNamespace(lanner=AppContext.from_settings(Settings(home=home, public_url=url))))


def endpoint_pid(app: Any, deployment_id: str) -> int | None:
    from lanner.deployments.models import Deployment

    with app.state.lanner.db.session() as session:
        external = session.get(Deployment, deployment_id).external_id
    if not external or ":" not in external or external.startswith(("launching:", "retiring:")):
        return None
    return int(external.split(":", 1)[0])


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_killed_endpoint_comes_back_by_itself_and_delete_ends_its_process(tmp_path: Path,
                                                                           shapes_detector: Path) -> None:
    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    server = start_server(home, LANNER_ENDPOINT_POLL_SECONDS="0.5", LANNER_SUPERVISOR_INTERVAL_SECONDS="0",
                          LANNER_MAINTENANCE_INTERVAL_SECONDS="0")
    app = server_context(home, server.url)
    pids: list[int] = []
    try:
        attach_weights(app, SimpleNamespace(username="alice"), shapes_detector)
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        created = platform.deployments.create("alice", project="shapes", model="tiny", deployment="tiny",
                                              name="Tiny", region="us-central1")
        wait_status(platform, "tiny", "ready", timeout=120)
        first = endpoint_pid(app, created["id"])
        assert first is not None and alive(first)
        pids.append(first)
        image = image_file(tmp_path)
        with image.open("rb") as handle:
            before = platform.deployments.predict("alice", "tiny", body={"file": handle, "conf": 0.01,
                                                                          "imgsz": IMGSZ})

        os.kill(first, signal.SIGKILL)
        crashed = wait_for(lambda: (d := platform.deployments.retrieve("alice", "tiny")["deployment"])["status"]
                           != "ready" and d, timeout=30, what="the supervisor to see the kill")
        assert "killed by signal 9" in crashed["statusMessage"] and "restarting in 1 s" in crashed["statusMessage"]
        back = wait_status(platform, "tiny", "ready", timeout=120)
        second = endpoint_pid(app, created["id"])
        assert second is not None and second != first and alive(second)
        pids.append(second)
        assert back["statusMessage"] == "serving with PyTorch"
        with image.open("rb") as handle:
            after = platform.deployments.predict("alice", "tiny", body={"file": handle, "conf": 0.01,
                                                                         "imgsz": IMGSZ})
        assert after["images"][0]["results"] == before["images"][0]["results"]
        messages = [e["message"] for e in platform.deployments.logs("alice", "tiny")["entries"]]
        assert any("killed by signal 9; restarting in 1 s (restart 1)" in m for m in messages), messages

        platform.deployments.delete("alice", "tiny")
        wait_for(lambda: not alive(second), timeout=30, what=f"the serving process {second} to end")
        assert platform.deployments.list("alice")["total"] == 0
    finally:
        server.stop()
        for pid in pids:  # a failed test leaves no serving process of its own behind
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)
        app.state.lanner.db.dispose()
