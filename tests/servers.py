"""Run the real ``lanner serve`` in a subprocess, and the real trainer with a clean environment."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

VENV_BIN = Path(sys.executable).parent


def wait_for(check: Callable[[], Any], *, timeout: float, what: str, every: float = 0.2) -> Any:
    """Poll ``check`` until it returns something true (returned), or fail naming ``what`` and the last answer:
    tests wait for states, never for a fixed time."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}; last: {last}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The tests poll (every 0.5 s while a run trains) faster than the product's API budget allows; like the app
# fixtures (conftest.GENEROUS_LIMITS), the real server gets limits that never refuse a test.
GENEROUS_LIMITS = {f"LANNER_{name}": "100000/minute" for name in (
    "AUTH_FAILURE_LIMIT_PER_IP", "LOGIN_LIMIT_PER_USERNAME", "LOGIN_LIMIT_PER_USERNAME_AND_ADDRESS", "API_RATE_LIMIT",
    "WORKER_RATE_LIMIT", "INFERENCE_RATE_LIMIT")}


def lanner_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANNER_", "PYTEST_"))}
    # Each test server has a fresh home: its start-up estimate would profile a model in every module's server
    # (seconds of CPU on a shared machine); tests/gpus/test_profile_cache.py tests it.
    env.update({"LANNER_HOME": str(home), "LANNER_PREPARE_ESTIMATES": "false", **GENEROUS_LIMITS, **extra})
    return env


def lanner_cli(home: Path, *args: str, **extra: str) -> str:
    result = subprocess.run([str(VENV_BIN / "lanner"), *args], capture_output=True, text=True,
                            env=lanner_env(home, **extra), check=False)
    if result.returncode != 0:
        raise RuntimeError(f"lanner {' '.join(args)} failed: {result.stderr}")
    return result.stdout.strip()


@dataclass
class Server:
    url: str
    home: Path
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_server(home: Path, port: int | None = None, *, serve_args: tuple[str, ...] = (),
                 log_name: str = "server.log", **extra: str) -> Server:
    """``lanner serve`` on ``port`` (a free one by default; the same one again to restart a killed server), with
    ``serve_args`` (``--workers 3``) and its output in ``home/log_name`` (several servers may share a home).
    ``LANNER_PUBLIC_URL`` in ``extra`` replaces the server's own URL (a balancer in front of several)."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    log = home / log_name
    home.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([str(VENV_BIN / "lanner"), "serve", "--port", str(port), *serve_args],
                               env=lanner_env(home, **{"LANNER_PUBLIC_URL": url, **extra}),
                               stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()}")
        try:
            if httpx.get(f"{url}/api/health", timeout=1).status_code == 200:
                return Server(url, home, process, log)
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"server did not start: {log.read_text()}")


def trainer_env(workdir: Path, platform_url: str, api_key: str) -> dict[str, str]:
    """What a worker gives the trainer: no pytest markers (they disable the Platform callbacks)."""
    return {
        "PATH": f"{VENV_BIN}:/usr/bin:/bin",
        "HOME": str(workdir),
        "YOLO_CONFIG_DIR": str(workdir / "config"),
        "ULTRALYTICS_PLATFORM_URL": platform_url,
        "ULTRALYTICS_API_KEY": api_key,
        "OMP_NUM_THREADS": "2",
        "MPLBACKEND": "Agg",
    }


def yolo(workdir: Path, env: dict[str, str], *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "yolo"), *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def yolo_workspace(workdir: Path, env: dict[str, str]) -> None:
    """Point everything the trainer writes at ``workdir``: its defaults for runs, datasets and weights are under
    the git root (the venv lives in the repository), so a test would otherwise write into the repository."""
    result = yolo(workdir, env, "settings", f"runs_dir={workdir / 'runs'}", f"datasets_dir={workdir / 'datasets'}",
                  f"weights_dir={workdir / 'weights'}", "sync=False")
    assert result.returncode == 0, result.stdout + result.stderr


class Balancer:
    """What fronts the processes of a real deployment: one public URL (``LANNER_PUBLIC_URL``, the one signed URLs
    for workers name) that hands each connection to the first process accepting it, so a worker whose server was
    killed reaches another."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        for port in self.ports:
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                continue
        else:
            client.close()
            return
        upstream.settimeout(None)
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def close(self) -> None:
        self.listener.close()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    for sock in (source, target):
        try:
            sock.shutdown(socket.SHUT_RDWR)  # either side gone: the other direction ends too
        except OSError:
            pass
