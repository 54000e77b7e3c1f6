"""Account endpoints of the SDK (``account.*``) plus login and key management for the web UI."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy import exists, func, or_, select
from sqlalchemy.orm import Session

from lanner.accounts import passwords, service
from lanner.accounts.dependencies import CurrentPrincipal, FastPrincipal, client_address
from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.accounts.schemas import ApiKeyCreate, FollowRequest, LoginRequest, PasswordChange
from lanner.accounts.sessions import SESSION_COOKIE, clear_session_cookie, end_session, set_session_cookie
from lanner.billing import service as billing_service
from lanner.context import AppContext
from lanner.datasets.models import Dataset
from lanner.db import iso
from lanner.errors import NotFound
from lanner.exports import usage
from lanner.http.deps import Ctx, DbSession
from lanner.projects.models import ModelRecord, Project
from lanner.teams import permissions
from lanner.teams import service as teams_service

router = APIRouter(tags=["account"])


@router.get("/api/account/summary")
def account_summary(principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    user = session.get(User, principal.user_id)
    assert user is not None
    projects = session.scalar(select(func.count()).select_from(Project).where(Project.owner_id == user.id)) or 0
    models = session.scalar(select(func.count()).select_from(ModelRecord).where(ModelRecord.owner_id == user.id)) or 0
    datasets = session.scalar(select(func.count()).select_from(Dataset).where(
        Dataset.owner_id == user.id, Dataset.deleted_at.is_(None))) or 0
    return {
        "username": user.username,
        "name": user.full_name or user.username,
        "accountType": user.account_type,
        "plan": user.tier,
        "creditsCents": billing_service.micros_to_cents(billing_service.balance_micros(session, user_id=user.id)),
        "counts": {"projects": int(projects), "datasets": int(datasets), "models": int(models)},
        "teams": teams_service.teams_of(session, user.id),
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


def _visible_user(session: Session, principal: Principal, username: str) -> User | None:
    """Yourself, a team you are in, or a user with something public (a project or a dataset, which ``explore``
    shows anyway). A user without public content is answered exactly like a username nobody has, in one query
    either way, so this route cannot be used to learn which usernames exist. (Answering 200 for everyone instead
    would mean inventing profiles for names nobody has.)"""
    if username.lower() == principal.username:
        return session.get(User, principal.user_id)
    public = or_(exists().where(Project.owner_id == User.id, Project.visibility == "public"),
                 exists().where(Dataset.owner_id == User.id, Dataset.visibility == "public",
                                Dataset.deleted_at.is_(None)))
    mine = User.id.in_(permissions.team_ids(principal.user_id))  # a team of the caller's, public things or not
    return session.scalar(select(User).where(User.username == username.lower(), or_(public, mine)))


@router.get("/api/users")
def profile(principal: CurrentPrincipal, session: DbSession, username: str | None = None) -> dict[str, Any]:
    user = _visible_user(session, principal, username or principal.username)
    if user is None:
        raise NotFound(f"user '{username}' not found")
    return {"user": {"username": user.username, "fullName": user.full_name or user.username,
                     "accountType": user.account_type,
                     "followerCount": service.follower_count(session, user.id),
                     "isFollowed": service.follows(session, follower_id=principal.user_id, followed_id=user.id)}}


@router.patch("/api/users")
def follow(body: FollowRequest, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    """``account.follow``: anyone ``account.profile`` shows you (a user or team with public content, or a team of
    yours) may be followed; ``account.profile`` reads it back. Anyone else is the 404 of a name nobody has."""
    user = _visible_user(session, principal, body.username)
    if user is None:
        raise NotFound(f"user '{body.username}' not found")
    count = service.set_follow(session, follower_id=principal.user_id, followed=user, follow=body.followed)
    return {"followed": body.followed, "followerCount": count}


@router.get("/api/storage")
def storage(principal: CurrentPrincipal, session: DbSession, details: Literal["true", "false"] = "false",
            owner: str | None = Query(default=None, max_length=100, description="Lanner: a team's storage "
                                      "instead of yours (any member)")) -> dict[str, Any]:
    """``account.storage``: the bytes your datasets, models and exports hold, per kind (``details=true``: and
    the ten largest items). Lanner has no storage plans: every ``limit`` and ``percent`` is 0."""
    owner_id, _ = permissions.workspace_for(session, user_id=principal.user_id, username=principal.username,
                                            owner=owner, action="read")
    workspace = session.get(User, owner_id)
    assert workspace is not None
    return usage.storage(session, workspace, details=details == "true")


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
