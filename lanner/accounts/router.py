"""Account endpoints of the SDK (``account.*``) plus login and key management for the web UI."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from lanner.accounts import passwords, service
from lanner.accounts.dependencies import CurrentPrincipal, FastPrincipal, client_address
from lanner.accounts.models import User
from lanner.accounts.schemas import ApiKeyCreate, LoginRequest, PasswordChange
from lanner.accounts.sessions import SESSION_COOKIE, clear_session_cookie, end_session, set_session_cookie
from lanner.context import AppContext
from lanner.db import iso
from lanner.http.deps import Ctx, DbSession

router = APIRouter(tags=["account"])


def _key_item(key: Any) -> dict[str, Any]:
    return {"keyId": key.id, "name": key.name, "keyPrefix": key.prefix, "createdAt": iso(key.created_at)}


@router.get("/api/api-keys")
def list_api_keys(principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return {"keys": [_key_item(k) for k in service.list_api_keys(session, user_id=principal.user_id)]}


@router.post("/api/api-keys", status_code=201)
def create_api_key(body: ApiKeyCreate, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    """Lanner extension: the plaintext key is in this response and nowhere else."""
    user = session.get(User, principal.user_id)
    assert user is not None
    key, plaintext = service.create_api_key(session, user=user, name=body.name)
    return {**_key_item(key), "key": plaintext}


@router.delete("/api/api-keys/{key_id}")
def revoke_api_key(key_id: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    service.revoke_api_key(session, user_id=principal.user_id, key_id=key_id, cache=ctx.key_cache)
    return {"success": True}


def _secure(ctx: AppContext) -> bool:
    return ctx.settings.public_url.startswith("https")


@router.post("/api/auth/login")
async def login(body: LoginRequest, request: Request, response: Response, ctx: Ctx) -> dict[str, Any]:
    """Async: the password hash runs in its own pool (``accounts.passwords``), not in a request thread."""
    signed_in = await passwords.sign_in(ctx, address=client_address(request), username=body.username,
                                        password=body.password)
    set_session_cookie(response, signed_in.token, secure=_secure(ctx))
    return {"username": signed_in.username}


@router.post("/api/auth/logout")
def logout(request: Request, response: Response, session: DbSession) -> dict[str, Any]:
    """Ends the session on the server too: a copy of the cookie stops working."""
    end_session(session, request.cookies.get(SESSION_COOKIE))
    clear_session_cookie(response)
    return {"success": True}


@router.post("/api/auth/password")
async def change_password(body: PasswordChange, principal: FastPrincipal, request: Request, response: Response,
                          ctx: Ctx) -> dict[str, Any]:
    """Lanner extension: a new password for the caller, who proves the current one. Every web session of the
    user ends; a browser that asked keeps signed in with a new session. API keys are unaffected."""
    token = await passwords.change_password(ctx, principal, address=client_address(request),
                                            current=body.currentPassword, new=body.newPassword,
                                            signed_in=principal.key_id is None)
    if token is not None:
        set_session_cookie(response, token, secure=_secure(ctx))
    return {"success": True}
