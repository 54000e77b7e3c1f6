"""What an account sees of itself and of others across the domains (the SDK's ``account.summary``,
``account.profile``, ``account.follow`` and ``account.storage``): counts of projects, datasets and models, credit,
teams, profiles and the bytes a workspace holds.

Why a package of its own, above the domains: these answers read projects, datasets, exports, billing and teams
together; kept in ``accounts`` (the lowest domain), its router imported six packages above it."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query
from sqlalchemy import exists, func, or_, select
from sqlalchemy.orm import Session

from lanner.accounts import service
from lanner.accounts.dependencies import CurrentPrincipal
from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.accounts.schemas import FollowRequest
from lanner.billing import service as billing_service
from lanner.datasets.models import Dataset
from lanner.errors import NotFound
from lanner.exports import usage
from lanner.http.deps import DbSession
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
