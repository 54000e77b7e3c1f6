"""Teams and their members: creating a team, adding, changing and removing members, invitations, leaving, and
the activity log. Every change is checked against ``permissions`` with the acting person's role, and written to
the team's activity log in the same transaction.

Whoever is not a member of a team gets the 404 of a team that does not exist: a team's name is not confirmed to
outsiders. Removing a member takes effect on their next request: roles are read per request, never cached with
an API key.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.accounts.security import key_digest
from lanner.accounts.service import create_user, get_user_by_username
from lanner.db import Base, iso, utcnow
from lanner.errors import BadRequest, Conflict, Forbidden, NotFound
from lanner.slugs import slugify
from lanner.teams.models import ActivityEvent, TeamInvitation, TeamMember
from lanner.teams.permissions import ACTIONS, ROLES, allows, rank, role_in

TEAM = "team"
OPERATOR = Principal.operator()  # the server's operator at the command line acts in every team as an owner
INVITATION_DAYS = 7
MAX_INVITATION_DAYS = 30


def team_slug(name: str) -> str:
    """A team's address (its username) from the name it was given, as datasets slugify theirs: ``Acme Vision`` is
    ``acme-vision``. At most 40 characters, like a username; a name without letters or digits has none."""
    slug = slugify(name)[:40].strip("-")
    if not slug:
        raise BadRequest("a team's name must contain at least one letter or digit")
    return slug


def create_team(session: Session, *, name: str, owner: User, tier: str = "free", full_name: str = "") -> User:
    """A team account for ``name`` (its slug is the username: the same namespace as usernames) with ``owner`` as
    its first owner. Its display name is ``full_name``, else ``name`` as typed (``Acme Vision``)."""
    team = create_user(session, username=team_slug(name), tier=tier, full_name=full_name or name.strip())
    team.account_type = TEAM
    session.add(TeamMember(team_id=team.id, user_id=owner.id, role="owner"))
    record(session, owner_id=team.id, actor_id=owner.id, action="created", target=f"team {team.username}")
    session.flush()
    return team


def team_for(session: Session, actor: Principal, name: str, action: str) -> tuple[User, str]:
    """(the team named ``name``, the actor's role in it) when the actor may do ``action`` there. Not a member (or
    no such team): 404; a member whose role is too low: 403 naming the role needed. The operator (``lanner``
    at the command line) is an owner of every team."""
    team = get_user_by_username(session, username=name)
    role = None
    if team is not None:
        role = "owner" if actor == OPERATOR else role_in(session, user_id=actor.user_id, owner_id=team.id)
    if team is None or team.account_type != TEAM or role is None:
        raise NotFound(f"team '{name}' not found")
    if not allows(role, action):
        raise Forbidden(f"{action.replace('_', ' ')} needs the {ACTIONS[action]} role in team '{team.username}' "
                        f"(yours: {role})", code="role_required", extra={"requiredRole": ACTIONS[action]})
    return team, role


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise BadRequest(f"role must be one of {', '.join(ROLES)}")
    return role


def _member(session: Session, team: User, username: str) -> tuple[User, TeamMember]:
    user = get_user_by_username(session, username=username)
    member = None if user is None else session.scalar(
        select(TeamMember).where(TeamMember.team_id == team.id, TeamMember.user_id == user.id))
    if user is None or member is None:
        raise NotFound(f"'{username}' is not a member of team '{team.username}'")
    return user, member


def _owners(session: Session, team: User) -> int:
    return session.scalar(select(func.count()).select_from(TeamMember).where(
        TeamMember.team_id == team.id, TeamMember.role == "owner")) or 0


def _may_grant(actor_role: str, role: str) -> None:
    """An admin manages viewers, editors and admins; only an owner makes (or unmakes) owners."""
    if role == "owner" and actor_role != "owner":
        raise Forbidden("only an owner can make or change an owner", code="role_required",
                        extra={"requiredRole": "owner"})


def add_member(session: Session, actor: Principal, team_name: str, username: str, role: str) -> TeamMember:
    team, actor_role = team_for(session, actor, team_name, "manage_members")
    _may_grant(actor_role, _check_role(role))
    user = get_user_by_username(session, username=username)
    if user is None or user.account_type == TEAM:
        raise NotFound(f"user '{username}' not found")
    if session.scalar(select(TeamMember.id).where(TeamMember.team_id == team.id, TeamMember.user_id == user.id)):
        raise Conflict(f"'{user.username}' is already a member of team '{team.username}'")
    member = TeamMember(team_id=team.id, user_id=user.id, role=role)
    session.add(member)
    record(session, owner_id=team.id, actor_id=actor.user_id, action="member_added", target=f"user {user.username}",
           detail={"role": role})
    session.flush()
    return member


def set_role(session: Session, actor: Principal, team_name: str, username: str, role: str) -> TeamMember:
    team, actor_role = team_for(session, actor, team_name, "manage_members")
    _check_role(role)
    user, member = _member(session, team, username)
    _may_grant(actor_role, role)
    _may_grant(actor_role, member.role)
    if member.role == "owner" and role != "owner" and _owners(session, team) == 1:
        raise Conflict(f"'{user.username}' is the last owner of team '{team.username}': make another owner first")
    before, member.role = member.role, role
    record(session, owner_id=team.id, actor_id=actor.user_id, action="role_changed", target=f"user {user.username}",
           detail={"from": before, "to": role})
    session.flush()
    return member


def remove_member(session: Session, actor: Principal, team_name: str, username: str) -> None:
    """An admin removes a member (an owner removes an owner); a member removes themself (``leave``)."""
    leaving = username.lower() == actor.username
    team, actor_role = team_for(session, actor, team_name, "read" if leaving else "manage_members")
    user, member = _member(session, team, username)
    if not leaving:
        _may_grant(actor_role, member.role)
    if member.role == "owner" and _owners(session, team) == 1:
        raise Conflict(f"'{user.username}' is the last owner of team '{team.username}': make another owner first, "
                       f"or delete the team")
    session.delete(member)
    record(session, owner_id=team.id, actor_id=actor.user_id, action="member_left" if leaving else "member_removed",
           target=f"user {user.username}")
    session.flush()


def set_budget(session: Session, actor: Principal, team_name: str, username: str, micros: int | None) -> TeamMember:
    team, _ = team_for(session, actor, team_name, "manage_members")
    user, member = _member(session, team, username)
    if micros is not None and micros < 0:
        raise BadRequest("budget must be zero or more")
    member.monthly_budget_micros = micros
    record(session, owner_id=team.id, actor_id=actor.user_id, action="budget_set", target=f"user {user.username}",
           detail={"monthlyBudgetMicros": micros})
    session.flush()
    return member


def invite(session: Session, actor: Principal, team_name: str, role: str,
           days: int = INVITATION_DAYS) -> tuple[TeamInvitation, str]:
    """A single-use invitation; returns the row and its token (shown once, only its digest is kept)."""
    team, actor_role = team_for(session, actor, team_name, "manage_members")
    _may_grant(actor_role, _check_role(role))
    if not 1 <= days <= MAX_INVITATION_DAYS:
        raise BadRequest(f"an invitation lasts 1 to {MAX_INVITATION_DAYS} days")
    token = "inv_" + secrets.token_urlsafe(24)
    invitation = TeamInvitation(team_id=team.id, role=role, digest=key_digest(token),
                                created_by_id=actor.user_id or None, expires_at=utcnow() + timedelta(days=days))
    session.add(invitation)
    record(session, owner_id=team.id, actor_id=actor.user_id, action="invited", target=f"role {role}",
           detail={"expiresAt": iso(invitation.expires_at)})
    session.flush()
    return invitation, token


def accept(session: Session, actor: Principal, token: str) -> tuple[User, TeamMember]:
    """The invitation's team joined with its role. An unknown, used or expired token: 404, all alike."""
    invitation = session.scalar(select(TeamInvitation).where(TeamInvitation.digest == key_digest(token))
                                .with_for_update())
    now = utcnow()
    if invitation is None or invitation.used_at is not None or invitation.expires_at <= now:
        raise NotFound("invitation not found, used or expired")
    team = session.get(User, invitation.team_id)
    assert team is not None
    existing = session.scalar(select(TeamMember).where(TeamMember.team_id == team.id,
                                                       TeamMember.user_id == actor.user_id))
    if existing is not None:
        raise Conflict(f"you are already a member of team '{team.username}'")
    invitation.used_at, invitation.used_by_id = now, actor.user_id
    member = TeamMember(team_id=team.id, user_id=actor.user_id, role=invitation.role)
    session.add(member)
    record(session, owner_id=team.id, actor_id=actor.user_id, action="member_joined",
           target=f"user {actor.username}", detail={"role": invitation.role})
    session.flush()
    return team, member


def member(session: Session, actor: Principal, team_name: str, username: str) -> dict[str, Any]:
    """One member as ``members`` lists them (any member may read it); not a member: 404."""
    team, _ = team_for(session, actor, team_name, "read")
    user, row = _member(session, team, username)
    return {"username": user.username, "fullName": user.full_name, "role": row.role,
            "monthlyBudgetMicros": row.monthly_budget_micros, "joinedAt": iso(row.created_at)}


def members(session: Session, actor: Principal, team_name: str) -> list[dict[str, Any]]:
    team, _ = team_for(session, actor, team_name, "read")
    rows = session.execute(select(User.username, User.full_name, TeamMember.role, TeamMember.monthly_budget_micros,
                                  TeamMember.created_at).join(TeamMember, TeamMember.user_id == User.id)
                           .where(TeamMember.team_id == team.id))
    out = [{"username": u, "fullName": n, "role": r, "monthlyBudgetMicros": b, "joinedAt": iso(c)}
           for u, n, r, b, c in rows]
    return sorted(out, key=lambda m: (-rank(m["role"]), m["username"]))


def teams_of(session: Session, user_id: str) -> list[dict[str, Any]]:
    """The teams a person belongs to, as ``account.summary``'s ``teams`` lists them."""
    rows = session.execute(select(User, TeamMember.role).join(TeamMember, TeamMember.team_id == User.id)
                           .where(TeamMember.user_id == user_id).order_by(User.username))
    return [{"userId": team.id, "username": team.username, "fullName": team.full_name,
             "iconLetter": team.username[:1].upper(), "plan": team.tier, "region": "us", "role": role}
            for team, role in rows]


def record(session: Session, *, owner_id: str, actor_id: str | None, action: str, target: str,
           detail: dict[str, Any] | None = None) -> None:
    """One line of the workspace's activity log, in the caller's transaction."""
    session.add(ActivityEvent(owner_id=owner_id, actor_id=actor_id or None, action=action, target=target[:300],
                              detail=detail or {}))


# What a team must no longer hold before it may be deleted: the tables, and which of their rows still count.
_HOLDINGS = (("datasets", "datasets (trashed ones included)", None), ("projects", "projects", None),
             ("deployments", "endpoints", "deleted_at"))


def delete_team(session: Session, actor: Principal, team_name: str, *, balance_micros: int) -> None:
    """The owner deletes an empty team: no datasets (trash included), projects or endpoints, and no credit
    (``balance_micros``, the caller's reading of the team's ledger: available plus held). Its members,
    invitations, activity and ledger history go with it; nothing is deleted behind anyone's back, so a team that
    still holds things is a 409 naming them (move them out, or delete them, first)."""
    team, _ = team_for(session, actor, team_name, "delete_team")
    held = []
    for table_name, label, live_when_null in _HOLDINGS:
        table = Base.metadata.tables[table_name]
        query = select(func.count()).select_from(table).where(table.c.owner_id == team.id)
        if live_when_null:
            query = query.where(table.c[live_when_null].is_(None))
        count = int(session.scalar(query) or 0)
        if count:
            held.append(f"{count} {label}")
    if balance_micros:
        held.append("credit (spend it, or ask the operator to move it)")
    if held:
        raise Conflict(f"team '{team.username}' still holds {', '.join(held)}: move or delete them first",
                       code="team_not_empty")
    session.delete(team)
    session.flush()
