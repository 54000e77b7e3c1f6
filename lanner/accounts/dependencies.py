"""Who is calling: the one place a request's principal comes from, an API key (``Authorization: Bearer``) or
the web session cookie. Routers depend on ``CurrentPrincipal`` (401 when nobody), ``FastPrincipal`` (async hot
paths) or ``OptionalPrincipal`` (pages that redirect to the login instead)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from lanner.accounts import service as accounts_service
from lanner.accounts.service import Principal
from lanner.accounts.sessions import SESSION_COOKIE, principal_from_cookie
from lanner.context import AppContext
from lanner.deps import Ctx, DbSession
from lanner.errors import Forbidden, Unauthorized

WORKER_WRITE_PATHS = ("/api/webhooks/",)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def _check_run_scope(request: Request, principal: Principal) -> Principal:
    """A run-scoped key lives in a training worker's environment: it may read (datasets, base weights) and
    report through the webhooks, nothing else, so a leaked worker key cannot spend credit or delete data."""
    if principal.run_id is not None and request.method not in ("GET", "HEAD") and not request.url.path.startswith(
            WORKER_WRITE_PATHS):
        raise Forbidden("this key belongs to a training worker: it may only read and report training events")
    return principal


def _resolve(request: Request, ctx: AppContext, session: Session) -> Principal | None:
    token = _bearer(request)
    if token:
        return _check_run_scope(request, accounts_service.authenticate_key(
            session, key=token, cache=ctx.key_cache, ttl=ctx.settings.api_key_cache_seconds))
    return principal_from_cookie(session, ctx.signer, request.cookies.get(SESSION_COOKIE))


def get_principal(request: Request, ctx: Ctx, session: DbSession) -> Principal:
    principal = _resolve(request, ctx, session)
    if principal is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer ul_...'")
    return principal


def get_optional_principal(request: Request, ctx: Ctx, session: DbSession) -> Principal | None:
    """Nobody (None) instead of a 401: for pages that send the visitor to the login."""
    return _resolve(request, ctx, session)


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]
OptionalPrincipal = Annotated[Principal | None, Depends(get_optional_principal)]


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
