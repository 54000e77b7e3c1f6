"""The forwarder's second try (``deployments.proxy.Forwarder.predict``): a pooled connection that the serving
process closed while idle fails one send; the caller must not see that as an endpoint that is down."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from lanner.accounts.principal import Principal
from lanner.deployments.proxy import Forwarder, Route
from lanner.errors import ServiceUnavailable

ROUTE = Route("d1", "u1", "tiny", "ready", None, "http://127.0.0.1:9")


class SameRoute:
    async def get(self, *_args: Any, **_kwargs: Any) -> Route:
        return ROUTE


def _forwarder(failures: int) -> tuple[Forwarder, list[str]]:
    forwarder, sent = Forwarder(), []

    async def send(url: str, *_args: Any) -> httpx.Response:
        sent.append(url)
        if len(sent) <= failures:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, content=b'{"images": []}')

    forwarder._send = send  # type: ignore[method-assign]
    return forwarder, sent


def _predict(forwarder: Forwarder) -> tuple[Route, int, bytes]:
    principal = Principal(user_id="u1", username="alice", tier="free", key_id=None)
    return asyncio.run(forwarder.predict(SameRoute(), ROUTE, principal, "alice", b"jpeg", {}))  # type: ignore[arg-type]


def test_a_connection_closed_while_idle_costs_one_retry_not_a_503() -> None:
    forwarder, sent = _forwarder(failures=1)
    route, status, body = _predict(forwarder)
    assert (route, status, body) == (ROUTE, 200, b'{"images": []}') and sent == [ROUTE.url, ROUTE.url]


def test_an_endpoint_that_fails_twice_is_a_503_that_says_so() -> None:
    forwarder, sent = _forwarder(failures=2)
    with pytest.raises(ServiceUnavailable, match="not answering: its process is being restarted"):
        _predict(forwarder)
    assert len(sent) == 2
