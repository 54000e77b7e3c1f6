"""A real ``redis-server`` (Debian's, ``make system-test-deps``) as a child of the test, on a free port: its
service does not start by itself on these machines, and nothing may be left running after a test."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.servers import free_port, wait_for


@dataclass
class RedisServer:
    port: int
    folder: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def start(self) -> None:
        """Started on the same port each time, so a restarted server is the one the apps were told about."""
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder)], stdout=(self.folder / "redis.log").open("a"), stderr=subprocess.STDOUT)
        wait_for(self._answers, timeout=30, what=f"redis-server on port {self.port} to answer PING")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=15)
            self.process = None


@contextmanager
def running_redis(folder: Path) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is missing: run `make system-test-deps`")
    folder.mkdir(parents=True, exist_ok=True)
    server = RedisServer(free_port(), folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()
