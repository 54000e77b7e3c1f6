"""One moto S3 server per test session (it takes seconds and 230 MB to start); each test gets its own bucket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.storage.moto import moto_server, new_bucket


@pytest.fixture(scope="session")
def moto_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Moto's request log: which client PUT what where (one line per request)."""
    return tmp_path_factory.mktemp("moto") / "moto.log"


@pytest.fixture(scope="session")
def moto_endpoint(moto_log: Path) -> Iterator[str]:
    with moto_server(moto_log) as endpoint:
        yield endpoint


@pytest.fixture
def bucket(moto_endpoint: str) -> str:
    return new_bucket(moto_endpoint)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return tmp_path / "spool"
