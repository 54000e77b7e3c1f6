"""moto's standalone S3 server, as a test's bucket endpoint: a real HTTP server speaking the S3 protocol (moto
does not check presigned signatures or expiry, so Lanner's own links stay tested where Lanner checks them)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.servers import VENV_BIN, free_port, wait_for

CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing"}


@contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """``moto_server`` on a free port, answering before this yields its endpoint; stopped (by its pid) after."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        process = subprocess.Popen([str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        def answers() -> bool:
            assert process.poll() is None, log.read_text()
            try:
                return httpx.get(endpoint, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(answers, timeout=60, what="moto_server to answer")
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def new_bucket(endpoint: str) -> str:
    """A fresh bucket for one test (moto takes an unsigned CreateBucket)."""
    name = f"lanner-{uuid.uuid4().hex[:12]}"
    response = httpx.put(f"{endpoint}/{name}", timeout=10)
    assert response.status_code == 200, response.text
    return name


def s3_settings(endpoint: str, bucket: str) -> dict[str, Any]:
    """Settings fields that put a server's blobs in ``bucket`` on ``endpoint``."""
    return {"blob_store": "s3", "s3_bucket": bucket, "s3_endpoint": endpoint, "s3_region": "us-east-1",
            "s3_access_key_id": CREDENTIALS["access_key_id"],
            "s3_secret_access_key": CREDENTIALS["secret_access_key"], "s3_path_style": True, "s3_allow_http": True}


def s3_env(endpoint: str, bucket: str) -> dict[str, str]:
    """The same as ``LANNER_*`` environment variables, for a server in a subprocess."""
    return {f"LANNER_{name.upper()}": str(value).lower() if isinstance(value, bool) else str(value)
            for name, value in s3_settings(endpoint, bucket).items()}
