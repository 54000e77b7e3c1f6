"""The address rate limits count: X-Forwarded-For is believed from LANNER_TRUSTED_PROXIES only (issue 30), so a
caller cannot escape the wrong-key throttle by writing the header itself, and behind a trusted proxy each client
is counted on its own, by the right-most address the proxies did not add."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from lanner.app import create_app
from lanner.config import Settings

WRONG = "Bearer ul_" + "0" * 40
SUMMARY = "/api/account/summary"
METRICS = "/api/webhooks/training/metrics"  # served by the fast lane, in front of the middlewares


@pytest.fixture
def proxied(settings: Settings) -> Iterator[Callable[[str], TestClient]]:
    """A client connecting from 127.0.0.1 (where a reverse proxy would be) to an app trusting ``trusted``, with
    10 wrong keys allowed per address."""
    opened: list[tuple[Any, TestClient]] = []

    def make(trusted: str) -> TestClient:
        app = create_app(settings.model_copy(update={"trusted_proxies": trusted,
                                                     "auth_failure_limit_per_ip": "10/minute"}))
        client = TestClient(app, client=("127.0.0.1", 50000)).__enter__()
        opened.append((app, client))
        return client

    yield make
    for app, client in opened:
        client.__exit__(None, None, None)
        app.state.lanner.db.dispose()


def _wrong_key(client: TestClient, forwarded: str | None, path: str = SUMMARY) -> int:
    headers = {"Authorization": WRONG} | ({"X-Forwarded-For": forwarded} if forwarded else {})
    response = client.post(path, headers=headers, json={}) if path == METRICS else client.get(path, headers=headers)
    if response.status_code == 429:
        assert response.json()["error"] and int(response.headers["retry-after"]) >= 1
    return response.status_code


def test_an_untrusted_peers_forwarded_for_is_ignored(proxied):
    client = proxied("")
    assert [_wrong_key(client, f"198.51.100.{i}") for i in range(10)] == [401] * 10
    assert _wrong_key(client, "198.51.100.200") == 429  # a new spoofed address each time: still the peer's count
    assert _wrong_key(client, None, METRICS) == 429


def test_behind_a_trusted_proxy_each_client_has_its_own_allowance(proxied):
    client = proxied("127.0.0.1")
    assert [_wrong_key(client, f"198.51.100.{i}") for i in range(30)] == [401] * 30
    assert [_wrong_key(client, "203.0.113.7") for _ in range(10)] == [401] * 10
    assert _wrong_key(client, "203.0.113.7") == 429
    assert _wrong_key(client, "203.0.113.8") == 401


def test_a_client_cannot_prepend_addresses_through_a_trusted_proxy(proxied):
    """The proxy appends the address it saw; what the client wrote before it is not believed."""
    client = proxied("127.0.0.1, 10.0.0.0/8")
    for i in range(10):  # the client's own header names a new address each time; a proxy at 10.1.2.3 appended
        assert _wrong_key(client, f"192.0.2.{i}, 203.0.113.9, 10.1.2.3") == 401
    assert _wrong_key(client, "192.0.2.99, 203.0.113.9, 10.1.2.3") == 429
    assert _wrong_key(client, "203.0.113.9") == 429
    assert _wrong_key(client, "203.0.113.9", METRICS) == 429  # the fast lane counts the same address
    assert _wrong_key(client, "203.0.113.10", METRICS) == 401


def test_a_malformed_trusted_proxy_stops_the_server_at_start():
    with pytest.raises(ValidationError, match="LANNER_TRUSTED_PROXIES"):
        Settings(trusted_proxies="10.0.0.0/8, proxy.internal")
    assert Settings(trusted_proxies=" 10.0.0.0/8 ,192.168.1.5, ::1 ").trusted_proxy_list == [
        "10.0.0.0/8", "192.168.1.5", "::1"]
