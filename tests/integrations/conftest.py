"""A moto S3 server (one per test module, on 127.0.0.1) and settings that allow loopback for it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from cryptography.fernet import Fernet
from moto.server import ThreadedMotoServer

from lanner.config import Settings
from lanner.integrations import stores
from tests.conftest import GENEROUS_LIMITS, TEST_URL, copy_of

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY-EXAMPLE-s3cr3t"  # the secret access key: must never come back out
KEY_ID = "AKIALANNERTEST"


@dataclass
class Bucket:
    endpoint: str
    s3: Any  # a boto3 client straight to moto: the test's own view of the bucket

    def credentials(self, **extra: Any) -> dict[str, Any]:
        return {"accessKeyId": KEY_ID, "secretAccessKey": SECRET, "endpoint": self.endpoint, **extra}


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request to moto drowns a failure
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(moto_endpoint: str) -> Iterator[Bucket]:
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                      region_name="us-east-1")
    s3.create_bucket(Bucket="photos")
    yield Bucket(moto_endpoint, s3)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="photos"):
        if page.get("Contents"):
            s3.delete_objects(Bucket="photos", Delete={"Objects": [{"Key": i["Key"]} for i in page["Contents"]]})
    s3.delete_bucket(Bucket="photos")


@pytest.fixture
def database_url(sqlite_template: Path, tmp_path: Path) -> str:
    return copy_of(sqlite_template, tmp_path)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Iterator[Settings]:
    value = Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL,
                     secret_key="test-secret", api_key_cache_seconds=0, secrets_key=Fernet.generate_key().decode(),
                     bucket_allowed_networks="127.0.0.0/8", bucket_timeout_seconds=10, **GENEROUS_LIMITS)
    yield value
    stores.set_resolver(value)  # the process's guard for these networks answers from the system again
