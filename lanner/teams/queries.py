"""What the team pages read and do besides ``service``: pending invitations (listed, revoked), what an
invitation link offers before it is accepted, the member ids a page needs for per-member spend, and the
activity log page by page with a cursor that never skips or repeats an event.

The same rules as ``service``: every call takes the acting ``Principal`` and checks it with ``service.team_for``
(an outsider gets the 404 of a team that does not exist, a member whose role is too low 403), and every change
is written to the team's activity log in the caller's transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session, aliased

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.accounts.security import key_digest
from lanner.db import iso, utcnow
from lanner.errors import BadRequest, NotFound
from lanner.teams import service
from lanner.teams.models import ActivityEvent, TeamInvitation, TeamMember

ACTIVITY_PAGE_MAX = 200
CURSOR_SEPARATOR = "~"


@dataclass(frozen=True)
class InvitationOffer:
    """What an invitation link offers whoever opens it: the team and the role."""

    team: str
    team_full_name: str
    role: str
    expires_at: datetime


def pending_invitations(session: Session, actor: Principal, team_name: str) -> list[dict[str, Any]]:
    """The team's invitations not yet used, revoked or expired, newest first (admins: ``manage_members``). The
    token itself is never kept, so a link cannot be shown again, only revoked."""
    team, _ = service.team_for(session, actor, team_name, "manage_members")
    creator = aliased(User)
    rows = session.execute(
        select(TeamInvitation, creator.username).outerjoin(creator, creator.id == TeamInvitation.created_by_id)
        .where(TeamInvitation.team_id == team.id, TeamInvitation.used_at.is_(None),
               TeamInvitation.expires_at > utcnow())
        .order_by(TeamInvitation.created_at.desc(), TeamInvitation.id))
    return [{"id": inv.id, "role": inv.role, "createdBy": by, "createdAt": iso(inv.created_at),
             "expiresAt": iso(inv.expires_at)} for inv, by in rows]


def revoke_invitation(session: Session, actor: Principal, team_name: str, invitation_id: str) -> None:
    """The invitation stops working now (it expires at once, so accepting it answers like an expired one).
    An admin may revoke any pending invitation of the team, an owner's one included; one that is not pending
    (used, expired, revoked, another team's, made up): 404."""
    team, _ = service.team_for(session, actor, team_name, "manage_members")
    invitation = session.scalar(select(TeamInvitation).where(
        TeamInvitation.id == invitation_id, TeamInvitation.team_id == team.id, TeamInvitation.used_at.is_(None),
        TeamInvitation.expires_at > utcnow()).with_for_update())
    if invitation is None:
        raise NotFound("invitation not found, used or expired")
    invitation.expires_at = utcnow()
    service.record(session, owner_id=team.id, actor_id=actor.user_id, action="invitation_revoked",
                   target=f"role {invitation.role}")
    session.flush()


def invitation_offer(session: Session, token: str) -> InvitationOffer | None:
    """What the link ``token`` offers, for the page that asks before joining; None for an unknown, used or
    expired token alike (``service.accept`` answers all three with the same 404)."""
    invitation = session.scalar(select(TeamInvitation).where(TeamInvitation.digest == key_digest(token)))
    if invitation is None or invitation.used_at is not None or invitation.expires_at <= utcnow():
        return None
    team = session.get(User, invitation.team_id)
    if team is None:
        return None
    return InvitationOffer(team.username, team.full_name, invitation.role, invitation.expires_at)


def member_ids(session: Session, actor: Principal, team_name: str) -> dict[str, str]:
    """username -> user id of the team's members (any member may read who is in the team), for what is kept
    per user id, such as each member's spend this month (``training.budgets.month_spend``)."""
    team, _ = service.team_for(session, actor, team_name, "read")
    rows = session.execute(select(User.username, User.id).join(TeamMember, TeamMember.user_id == User.id)
                           .where(TeamMember.team_id == team.id))
    return {username: user_id for username, user_id in rows}


def _cursor(event: ActivityEvent) -> str:
    return f"{iso(event.created_at)}{CURSOR_SEPARATOR}{event.id}"


def _parse_cursor(cursor: str) -> tuple[datetime, str]:
    at, _, event_id = cursor.partition(CURSOR_SEPARATOR)
    try:
        when = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None or when.tzinfo is None or not event_id or len(event_id) > 32:
        raise BadRequest("cursor is not one this page gave out: start again from the newest")
    return when, event_id


def activity_page(session: Session, actor: Principal, team_name: str, *, limit: int = 50,
                  cursor: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the team's activity, newest first (admins, as ``service.activity``), and the cursor of the
    next (older) page or None at the end. The cursor is the last event's (time, id): events written in the
    same instant are neither skipped nor repeated across pages."""
    team, _ = service.team_for(session, actor, team_name, "manage_billing")
    limit = max(1, min(limit, ACTIVITY_PAGE_MAX))
    query = (select(ActivityEvent, User.username).outerjoin(User, User.id == ActivityEvent.actor_id)
             .where(ActivityEvent.owner_id == team.id)
             .order_by(ActivityEvent.created_at.desc(), ActivityEvent.id.desc()).limit(limit + 1))
    if cursor:
        at, event_id = _parse_cursor(cursor)
        query = query.where(or_(ActivityEvent.created_at < at,
                                and_(ActivityEvent.created_at == at, ActivityEvent.id < event_id)))
    rows = session.execute(query).all()
    events = [{"id": e.id, "at": e.created_at, "actor": name, "action": e.action, "target": e.target,
               "detail": e.detail} for e, name in rows[:limit]]
    return events, (_cursor(rows[limit - 1][0]) if len(rows) > limit else None)
