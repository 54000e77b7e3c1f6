"""Shared by the benchmarks: venv tools, a `lanner serve` subprocess, machine facts, docs/benchmarks.md sections,
and a big dataset seeded from a small real import (``seed_items``)."""

from __future__ import annotations

import hashlib
import os
import platform
import random
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


def serve_main(app: Any, description: str, default_port: int) -> None:
    """``main`` of a baseline app (bare_app.py, stub_platform.py): served as ``lanner serve`` serves Lanner, one
    uvicorn process, log level warning, no access log."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=default_port)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, workers=1, log_level="warning", access_log=False)


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


def seed_items(home: Path, owner: str, slug: str, count: int, *, distinct_images: bool = False) -> int:
    """Replace the items of dataset ``owner/slug`` (a real import) with ``count`` rows that reuse its images and
    labels under unique names (``img_000123.jpg``, 80/20 train/val), in one transaction; returns the manifest.

    ``distinct_images``: each row also gets its own ``image_blobs`` row, as an import of distinct images leaves
    them (a digest of its own, a random perceptual hash, the source's size, dimensions and thumbnail), so the
    health checks find no duplicates. Otherwise every source image is shared by ``count / sources`` rows."""
    from sqlalchemy import delete, select, update

    from lanner.accounts.models import User
    from lanner.datasets import service
    from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
    from lanner.db import make_engine, utcnow

    engine = make_engine(f"sqlite:///{home / 'lanner.db'}")
    table, blobs = DatasetItem.__table__, ImageBlob.__table__
    rng = random.Random(count)
    try:
        t0 = time.perf_counter()
        with engine.begin() as conn:
            dataset_id, manifest = conn.execute(
                select(Dataset.id, Dataset.manifest_id).join(User, User.id == Dataset.owner_id)
                .where(User.username == owner, Dataset.slug == slug)).one()
            sources = conn.execute(select(table.c.sha256, table.c.labels, table.c.class_id, blobs.c.size,
                                          blobs.c.width, blobs.c.height, blobs.c.format, blobs.c.thumb_sha256)
                                   .join(blobs, blobs.c.sha256 == table.c.sha256)
                                   .where(table.c.manifest_id == manifest).order_by(table.c.name)).all()
            if not sources:
                raise RuntimeError(f"dataset {owner}/{slug} has no items to reuse")
            conn.execute(delete(table).where(table.c.manifest_id == manifest))
            keys: set[str] = set()
            now = utcnow()
            chunk: list[dict[str, Any]] = []
            images: list[dict[str, Any]] = []
            for i in range(count):
                source = sources[i % len(sources)]
                sha256, labels, class_id = source.sha256, source.labels, source.class_id
                if distinct_images:
                    sha256 = hashlib.sha256(f"{source.sha256}:{i}".encode()).hexdigest()
                    images.append({"sha256": sha256, "size": source.size, "width": source.width,
                                   "height": source.height, "format": source.format,
                                   "phash": rng.getrandbits(64) - (1 << 63), "thumb_sha256": source.thumb_sha256,
                                   "created_at": now})
                key = service.new_key()
                while key in keys:
                    key = service.new_key()
                keys.add(key)
                chunk.append({"manifest_id": manifest, "key": key, "name": f"img_{i:06d}.jpg",
                              "split": "val" if i % 5 == 4 else "train", "sha256": sha256, "labels": labels,
                              "class_id": class_id, "issues": ",", "updated_at": now,
                              **service.label_fields(labels, class_id)})
                if len(chunk) == 5000:
                    if images:
                        conn.execute(blobs.insert(), images)
                        images = []
                    conn.execute(table.insert(), chunk)
                    chunk = []
            if images:
                conn.execute(blobs.insert(), images)
            if chunk:
                conn.execute(table.insert(), chunk)
            conn.execute(update(Dataset).where(Dataset.id == dataset_id)
                         .values(revision=Dataset.revision + 1, updated_at=now))
        print(f"[seed] {count:,} items into {owner}/{slug} (manifest {manifest}) in {time.perf_counter() - t0:.1f}s",
              file=sys.stderr, flush=True)
        return manifest
    finally:
        engine.dispose()


class FlameGraph:
    """``py-spy record`` attached to a running process (``with FlameGraph(pid, path):``): samples every thread
    until the block ends, then writes an SVG flame graph to ``path``. Threads waiting on a lock or a queue show
    as samples too (py-spy cannot tell them idle here); ``gil=True`` keeps only the thread holding the GIL, which
    is what a Python server's throughput is bound by. Sampling stops the
    process briefly each time: numbers measured under it are not the benchmark's numbers."""

    def __init__(self, pid: int, path: Path | None, *, rate: int = 200, gil: bool = False) -> None:
        self.pid, self.path, self.rate, self.gil = pid, path, rate, gil
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> FlameGraph:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.proc = subprocess.Popen([venv_bin("py-spy"), "record", "--pid", str(self.pid), "--rate",
                                          str(self.rate), "--threads", "--format", "flamegraph", "--output",
                                          str(self.path), *(["--gil"] if self.gil else [])],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(1.0)  # attached before the load starts
        return self

    def __exit__(self, *_: Any) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)  # py-spy writes the graph and exits
        try:
            _, err = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RuntimeError("py-spy did not finish writing its flame graph") from None
        if not self.path or not self.path.exists():
            raise RuntimeError(f"py-spy wrote no flame graph: {err.decode(errors='replace')[-2000:]}")
        print(f"[py-spy] flame graph in {self.path}", file=sys.stderr)
