"""Who is calling: the one place a request's principal comes from, an API key (``Authorization: Bearer``) or
the web session cookie. Routers depend on ``CurrentPrincipal`` (401 when nobody), ``FastPrincipal`` (async hot
paths), ``OptionalPrincipal`` (pages that redirect to the login instead) or ``AdminPrincipal`` (the server's
admins only: 403 for anyone else; the flag is cached with an API key, like the rest of its principal).

Rate limits are applied here too, because only here is it known who is calling: every key is checked, a wrong
one is counted against its address (429 instead of 401 once the address is past its budget; a valid key from the
same address is served all the same), and every request spends its caller's budget (``lanner.http.ratelimit``).
Routes without a principal (health, the login page, signed storage links, whose signature is the credential)
spend none."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.accounts.sessions import SESSION_COOKIE, principal_from_cookie
from lanner.context import AppContext
from lanner.db import set_actor
from lanner.errors import Forbidden, Unauthorized
from lanner.http.deps import Ctx, DbSession

WORKER_WRITE_PATHS = ("/api/webhooks/",)


def _bearer(request: Request) -> str | None:
    # The raw headers, not request.headers: building that mapping cost more than the rest of a cached key's check.
    header = ""
    for name, value in request.scope["headers"]:
        if name == b"authorization":
            header = value.decode("latin-1")
            break
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


def client_address(request: Request) -> str:
    """The caller's address: the connecting one, or what a proxy in LANNER_TRUSTED_PROXIES says in
    X-Forwarded-For (``lanner.http.proxies`` rewrote it before the request got here)."""
    return request.client.host if request.client else "unknown"


def _admit(request: Request, ctx: AppContext, principal: Principal) -> Principal:
    """A known caller: within its key's scope, then one request from its budget (a key's, or a web session's
    user's). Training workers (run-scoped keys, and the trainer's webhooks with the user's key) spend the
    larger worker budget: the trainer reports often and must never be cut off mid-run by the API limit."""
    _check_run_scope(request, principal)
    path = request.scope["path"]  # not request.url: building the URL object cost more than the whole limit check
    identity = f"key:{principal.key_id}" if principal.key_id else f"user:{principal.user_id}"
    ctx.limits.count_request(identity, path, worker=principal.run_id is not None or path.startswith(
        WORKER_WRITE_PATHS))
    return principal


def _key_principal(request: Request, ctx: AppContext, session: Session, token: str) -> Principal:
    try:
        return accounts_service.authenticate_key(session, key=token, cache=ctx.key_cache,
                                                 ttl=ctx.settings.api_key_cache_seconds)
    except Unauthorized:
        ctx.limits.wrong_key(client_address(request))  # 429 past the address's budget
        raise


def _resolve(request: Request, ctx: AppContext, session: Session) -> Principal | None:
    token = _bearer(request)
    if token:
        principal: Principal | None = _key_principal(request, ctx, session, token)
    else:
        principal = principal_from_cookie(session, request.cookies.get(SESSION_COOKIE))
    return _admit(request, ctx, principal) if principal is not None else None


def get_principal(request: Request, ctx: Ctx, session: DbSession) -> Principal:
    principal = _resolve(request, ctx, session)
    set_actor(session, principal.user_id if principal is not None else None)
    if principal is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer ul_...'")
    return principal


def get_optional_principal(request: Request, ctx: Ctx, session: DbSession) -> Principal | None:
    """Nobody (None) instead of a 401: for pages that send the visitor to the login."""
    principal = _resolve(request, ctx, session)
    set_actor(session, principal.user_id if principal is not None else None)
    return principal


def require_admin(principal: Principal) -> Principal:
    """The server's admin (``User.is_admin``), or 403: the operator's view of the cluster and of every account's
    charges. A worker's run-scoped key never counts as one, whoever started the run."""
    if not principal.is_admin or principal.run_id is not None:
        raise Forbidden("only a server admin may see this (an operator makes one with `lanner users create NAME "
                        "--admin` or `lanner users set-admin NAME`)", code="admin_required")
    return principal


def get_admin_principal(request: Request, ctx: Ctx, session: DbSession) -> Principal:
    return require_admin(get_principal(request, ctx, session))


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]
OptionalPrincipal = Annotated[Principal | None, Depends(get_optional_principal)]
AdminPrincipal = Annotated[Principal, Depends(get_admin_principal)]


async def get_principal_nonblocking(request: Request) -> Principal:
    """For async hot paths: a cached key costs no thread hop; anything else is checked in the threadpool."""
    ctx: AppContext = request.app.state.lanner
    token = _bearer(request)
    if token:
        principal = accounts_service.cached_principal(key=token, cache=ctx.key_cache)
        if principal is not None:
            return _admit(request, ctx, principal)

    def lookup() -> Principal:
        with ctx.db.session() as session:
            return get_principal(request, ctx, session)

    return await run_in_threadpool(lookup)


FastPrincipal = Annotated[Principal, Depends(get_principal_nonblocking)]
