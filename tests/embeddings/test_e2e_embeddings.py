"""Embeddings end to end: the official SDK against a real ``lanner serve`` whose queue runs the real worker
(``python -m lanner.embeddings.worker``) through the local executor. The worker is killed mid-job: the job runs
again and its second attempt embeds only the images the first did not deliver, then trains the model's
copy-detection head, through which the similar images are then found."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from ultralytics_platform import Platform

from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset
from tests.sdk_types import assert_sdk_type
from tests.servers import lanner_cli, start_server

pytestmark = pytest.mark.e2e
IMAGES = 80


def _job(home: Path) -> tuple[str, int, str | None]:
    with sqlite3.connect(home / "lanner.db") as db:
        return db.execute("SELECT status, attempt, external_id FROM embedding_jobs").fetchone()


def _wait(what: str, check: Any, timeout: float = 240) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"still waiting for {what} after {timeout} s")


def test_a_killed_worker_resumes_and_the_vectors_answer_similar_images(tmp_path: Path, tiny_weights: Path) -> None:
    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    official = tmp_path / "yolo11n.pt"
    official.write_bytes(tiny_weights.read_bytes())
    lanner_cli(home, "models", "add-official", str(official))  # the model the server picks: nothing trained here
    server = start_server(home, LANNER_EMBEDDING_POLL_SECONDS="0.2", LANNER_EMBEDDING_IMGSZ="64",
                          LANNER_EMBEDDING_BATCH="2", LANNER_EMBEDDING_HEAD_MIN_IMAGES=str(IMAGES))
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        make_detection_dataset(tmp_path / "shapes", train=IMAGES, val=0, size=64)
        upload_dataset(platform, httpx, "alice", "shapes", package(tmp_path / "shapes", tmp_path / "zip"))
        job_id = platform.datasets.create_embeddings("alice", "shapes")["jobId"]

        def delivered_some() -> dict[str, Any] | None:
            active = platform.datasets.embeddings("alice", "shapes")["activeJob"]
            progress = (active or {}).get("progress") or {}
            return progress if progress.get("processed", 0) >= 4 else None

        _wait("the first pages", delivered_some)
        status, attempt, external_id = _job(home)
        assert status == "running" and attempt == 1 and external_id
        pid = int(external_id.split(":")[0])
        os.kill(pid, signal.SIGSTOP)  # the worker stands still while the progress is read
        paused = assert_sdk_type(platform.datasets.embeddings("alice", "shapes"), "DatasetsEmbeddingsResponse")
        first = paused["activeJob"]["progress"]["processed"]
        assert 4 <= first < IMAGES, paused
        os.kill(pid, signal.SIGKILL)

        done = _wait("the analysis", lambda: (lambda s: s if s["analyzedAt"] else None)(
            platform.datasets.embeddings("alice", "shapes")))
        assert done["embeddingsCount"] == IMAGES and done["activeJob"] is None
        assert _job(home)[:2] == ("completed", 2)
        log = (home / "embeddings" / "jobs" / job_id).rglob("*.log")
        second = [line for path in log for line in path.read_text().splitlines() if "attempt 2" in line]
        assert second, "the second attempt ran"
        lines = [line for path in (home / "embeddings" / "jobs" / job_id).rglob("*.log")
                 for line in path.read_text().splitlines()]
        assert any(f"copy-detection head trained on {IMAGES} images" in line for line in lines), lines[-5:]
        with sqlite3.connect(home / "lanner.db") as db:
            assert db.execute("SELECT images FROM embedding_heads").fetchall() == [(IMAGES,)]
        image = platform.datasets.images("alice", "shapes", limit=1)["images"][0]
        similar = assert_sdk_type(platform.images.find_similar_images(image["id"], include_source_dataset="true"),
                                  "ImagesFindSimilarImagesResponse")["images"]
        assert len(similar) == 20 and image["hash"] not in {i["hash"] for i in similar}
        spaces = [p.name for p in (home / "embeddings" / "indexes").iterdir()]
        assert len(spaces) == 1 and "-head-" in spaces[0], spaces  # the index searched through the head
    finally:
        server.stop()
