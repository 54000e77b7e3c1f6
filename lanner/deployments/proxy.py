"""The way a predict reaches a dedicated endpoint: the server authenticates the owner's key, finds where the
deployment answers, forwards the image there and passes the answer back unchanged.

- ``Routes``: (owner, deployment) -> where it answers and whether it is ready, cached for a second per server
  process, so the hot path touches the database about once a second per endpoint, not once a request. A
  deployment that is not ready is a 409 that says what it is doing.
- ``Forwarder``: one pooled HTTP client per event loop; the image as the body, the options in the query
  (``deployments.serving``). A process that does not answer (killed a moment ago) is looked up again: a
  restart elsewhere is retried once, a deployment that is no longer ready is a 409, one still marked ready is
  a 503 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.db import Database
from lanner.deployments import serving, state
from lanner.deployments.models import Deployment
from lanner.errors import Conflict, NotFound, ServiceUnavailable
from lanner.inference.predictor import Options
from lanner.teams import permissions

CACHE_SECONDS = 1.0
FORWARD_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class Route:
    id: str
    owner_id: str
    slug: str
    status: str
    message: str | None
    url: str | None


class Routes:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[tuple[str, str], tuple[float, Route | None]] = {}
        self._lock = threading.Lock()

    def forget(self, _deployment_id: str | None = None) -> None:
        with self._lock:
            self._cache.clear()

    def _read(self, user_id: str, owner: str, slug: str) -> tuple[Route | None, bool]:
        """(the route, whether it may be cached): a team's endpoint is read afresh every time, so a member
        removed a moment ago is refused at once; a person's own for a second."""
        with self.db.session() as session:
            workspace = session.execute(select(User.id, User.account_type).where(
                User.username == owner.lower())).first()
            if workspace is None or permissions.role_in(session, user_id=user_id, owner_id=workspace.id) is None:
                return None, True
            d = session.scalar(select(Deployment).where(Deployment.owner_id == workspace.id, Deployment.slug == slug,
                                                        Deployment.deleted_at.is_(None)))
            route = None if d is None else Route(d.id, d.owner_id, d.slug, d.status, d.status_message, d.url)
            return route, workspace.account_type != "team"

    async def get(self, principal: Principal, owner: str, slug: str, *, fresh: bool = False) -> Route:
        """Ready deployment ``owner/slug`` of the caller's own workspace or a team of theirs (any role may
        predict): 404 for anyone else's, 409 while it is not ready."""
        if not principal.user_id:
            raise NotFound(f"deployment '{owner}/{slug}' not found")
        key = (principal.user_id, owner.lower(), slug)
        cached = self._cache.get(key)
        if fresh or cached is None or time.monotonic() - cached[0] > CACHE_SECONDS:
            route, cacheable = await run_in_threadpool(self._read, principal.user_id, owner, slug)
            if cacheable:
                with self._lock:
                    self._cache[key] = (time.monotonic(), route)
        else:
            route = cached[1]
        if route is None:
            raise NotFound(f"deployment '{owner}/{slug}' not found")
        if route.status != state.READY or not route.url:
            why = f": {route.message}" if route.message else ""
            raise Conflict(f"deployment '{owner}/{slug}' is {route.status}{why}; it answers predict once it is ready",
                           code="not_ready", extra={"status": route.status})
        return route


class Forwarder:
    def __init__(self) -> None:
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        found = self._clients.get(id(loop))
        if found is None or found[0] is not loop:
            client = httpx.AsyncClient(timeout=FORWARD_TIMEOUT_SECONDS, limits=httpx.Limits(
                max_connections=512, max_keepalive_connections=128))
            self._clients = {k: v for k, v in self._clients.items() if not v[0].is_closed()}
            self._clients[id(loop)] = (loop, client)
            return client
        return found[1]

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for loop, client in clients.values():
            if loop is asyncio.get_running_loop():
                await client.aclose()

    async def _send(self, url: str, data: bytes, options: Options, user_agent: str | None) -> httpx.Response:
        headers = {"content-type": "application/octet-stream"}
        if user_agent:
            headers["user-agent"] = user_agent[:300]
        return await self._client().post(f"{url}/predict", content=data, params=serving.query_of(options),
                                         headers=headers)

    async def predict(self, routes: Routes, route: Route, principal: Principal, owner: str, data: bytes,
                      options: Options, *, user_agent: str | None = None) -> tuple[Route, int, bytes]:
        """(the route used, status, JSON body) of the endpoint's answer. A failed send is tried once more: on the
        endpoint's new address when it moved, else on the same one over a new connection (a pooled connection the
        serving process closed while idle, after its keep-alive, fails the first send only: a predict has no side
        effect to repeat). Two failures are the 503 of an endpoint that is not answering."""
        try:
            response = await self._send(route.url or "", data, options, user_agent)
        except httpx.TransportError:
            fresh = await routes.get(principal, owner, route.slug, fresh=True)  # 404 or 409 when it moved on
            restarting = fresh.url == route.url
            route = fresh
            try:
                response = await self._send(route.url or "", data, options, user_agent)
            except httpx.TransportError:
                why = ": its process is being restarted" if restarting else ""
                raise ServiceUnavailable(f"deployment '{owner}/{route.slug}' is not answering{why}; try again in a "
                                         "moment", retry_after=2) from None
        return route, response.status_code, response.content


def summary_of(status: int, body: bytes) -> dict[str, Any]:
    """What the request log keeps of an answer: image size and result count, or the error's text."""
    try:
        parsed = orjson.loads(body)
    except ValueError:
        return {"error": body[:200].decode("utf-8", "replace")}
    if status >= 400 or not isinstance(parsed, dict):
        return {"error": str(parsed.get("error", ""))[:300] if isinstance(parsed, dict) else ""}
    images = parsed.get("images") or [{}]
    shape = images[0].get("shape") or [None, None]
    return {"height": shape[0], "width": shape[1] if len(shape) > 1 else None,
            "detections": len(images[0].get("results") or [])}
