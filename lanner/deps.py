"""FastAPI dependencies shared by every router: the app context, a DB session per request, the caller."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from lanner.accounts import service as accounts_service
from lanner.accounts.service import Principal
from lanner.context import AppContext
from lanner.errors import Forbidden, Unauthorized

SESSION_COOKIE = "lanner_session"


async def get_ctx(request: Request) -> AppContext:
    """Async on purpose: FastAPI runs a sync dependency in the threadpool, a hop per request for a lookup."""
    return request.app.state.lanner


Ctx = Annotated[AppContext, Depends(get_ctx)]


def get_session(ctx: Ctx) -> Iterator[Session]:
    """One unit of work per request, committed before the response is sent."""
    with ctx.db.session() as session:
        yield session


DbSession = Annotated[Session, Depends(get_session)]


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


WORKER_WRITE_PATHS = ("/api/webhooks/",)


def _check_run_scope(request: Request, principal: Principal) -> Principal:
    """A run-scoped key lives in a training worker's environment: it may read (datasets, base weights) and
    report through the webhooks, nothing else, so a leaked worker key cannot spend credit or delete data."""
    if principal.run_id is not None and request.method not in ("GET", "HEAD") and not request.url.path.startswith(
            WORKER_WRITE_PATHS):
        raise Forbidden("this key belongs to a training worker: it may only read and report training events")
    return principal


def get_principal(request: Request, ctx: Ctx, session: DbSession) -> Principal:
    token = _bearer(request)
    if token:
        return _check_run_scope(request, accounts_service.authenticate_key(
            session, key=token, cache=ctx.key_cache, ttl=ctx.settings.api_key_cache_seconds
        ))
    from lanner.web.sessions import principal_from_cookie

    principal = principal_from_cookie(session, ctx, request.cookies.get(SESSION_COOKIE))
    if principal is not None:
        return principal
    raise Unauthorized("missing API key: send 'Authorization: Bearer ul_...'")


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


async def get_principal_nonblocking(request: Request, ctx: Ctx) -> Principal:
    """For async hot paths: a cached key costs no thread hop; anything else is checked in the threadpool."""
    token = _bearer(request)
    if token:
        principal = accounts_service.cached_principal(key=token, cache=ctx.key_cache)
        if principal is not None:
            return _check_run_scope(request, principal)

    def lookup() -> Principal:
        with ctx.db.session() as session:
            return get_principal(request, ctx, session)

    return await run_in_threadpool(lookup)


FastPrincipal = Annotated[Principal, Depends(get_principal_nonblocking)]
