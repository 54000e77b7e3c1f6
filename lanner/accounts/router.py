"""Account endpoints of the SDK (``account.*``) plus login and key management for the web UI."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from sqlalchemy import func, select

from lanner.accounts import service
from lanner.accounts.dependencies import CurrentPrincipal
from lanner.accounts.models import User
from lanner.accounts.schemas import ApiKeyCreate, LoginRequest
from lanner.accounts.sessions import clear_session_cookie, set_session_cookie
from lanner.billing import service as billing_service
from lanner.db import iso
from lanner.deps import Ctx, DbSession
from lanner.errors import NotFound
from lanner.projects.models import ModelRecord, Project

router = APIRouter(tags=["account"])


@router.get("/api/account/summary")
def account_summary(principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    user = session.get(User, principal.user_id)
    assert user is not None
    projects = session.scalar(select(func.count()).select_from(Project).where(Project.owner_id == user.id)) or 0
    models = session.scalar(select(func.count()).select_from(ModelRecord).where(ModelRecord.owner_id == user.id)) or 0
    return {
        "username": user.username,
        "name": user.full_name or user.username,
        "accountType": "personal",
        "plan": user.tier,
        "creditsCents": billing_service.micros_to_cents(billing_service.balance_micros(session, user_id=user.id)),
        "counts": {"projects": int(projects), "datasets": 0, "models": int(models)},
        "teams": [],
    }


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


@router.get("/api/users")
def profile(principal: CurrentPrincipal, session: DbSession, username: str | None = None) -> dict[str, Any]:
    user = service.get_user_by_username(session, username=username or principal.username)
    if user is None:
        raise NotFound(f"user '{username}' not found")
    return {"user": {"username": user.username, "fullName": user.full_name or user.username,
                     "accountType": "personal", "followerCount": 0, "isFollowed": False}}


@router.post("/api/auth/login")
def login(body: LoginRequest, response: Response, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    user = service.authenticate_password(session, username=body.username, password=body.password)
    set_session_cookie(response, ctx.signer, user.id)
    return {"username": user.username}


@router.post("/api/auth/logout")
def logout(response: Response) -> dict[str, Any]:
    clear_session_cookie(response)
    return {"success": True}
