"""Shared by the benchmarks: venv tools, a `lanner serve` subprocess, machine facts, docs/benchmarks.md sections."""

from __future__ import annotations

import os
import platform
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
HOST = "127.0.0.1"


def venv_bin(name: str) -> str:
    """The executable next to this interpreter (the project venv), else the repository's .venv."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    return str(ROOT / ".venv" / "bin" / name)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def local_client(**kwargs: Any) -> httpx.Client:
    # trust_env=False: never route 127.0.0.1 through a proxy named in the environment.
    return httpx.Client(trust_env=False, timeout=30.0, **kwargs)


@dataclass
class Server:
    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    _log: Any = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 90.0) -> None:
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.proc = subprocess.Popen(self.argv, env=self.env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        with local_client() as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with code {self.proc.returncode}:\n{self.log_tail()}")
                try:
                    if client.get(f"{self.url}/api/health", timeout=2.0).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not answer /api/health within {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            # Its own session (start_new_session): signal the group, which is only this server.
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def run_cli(args: list[str], env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run([venv_bin("lanner"), *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"lanner {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def verdict(ok: bool) -> str:
    return "pass" if ok else "**FAIL**"


def write_section(title: str, section: str) -> None:
    """Replace the section headed ``title`` in docs/benchmarks.md (or append it), keeping every other section."""
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    start = text.find(title)
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        following = re.search(r"^## ", text[start + len(title):], re.M)
        end = start + len(title) + following.start() if following else len(text)
        rest = text[end:]
        text = text[:start] + section + ("\n" + rest if rest else "")
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text.rstrip("\n") + "\n")
