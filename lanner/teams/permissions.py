"""Who may do what in a workspace: the one table every action is checked against.

A person's own workspace is theirs as ``owner``; in a team they act with their membership's role; anyone else has
no role, and the resource answers the 404 of one that does not exist (public things stay readable to all, which
the caller checks before asking here). API keys act as their user, within that user's roles.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.errors import Forbidden, NotFound
from lanner.teams.models import TeamMember

ROLES = ("viewer", "editor", "admin", "owner")  # each role can do everything the ones before it can

# action -> the least role that may do it
ACTIONS: dict[str, str] = {
    "read": "viewer",            # datasets, labels, projects, models, runs, activity of the workspace's things
    "write": "editor",           # create and change datasets, labels, projects, models
    "train": "editor",           # start and cancel runs, exports, endpoints (charged to the workspace)
    "delete": "editor",          # delete datasets, projects, models
    "manage_members": "admin",   # add, remove, change roles, invitations, per-member budgets
    "manage_billing": "admin",   # the team's keys, budget, top-ups, activity log
    "transfer": "admin",         # move a dataset or project out of the workspace (lanner/teams/transfers.py)
    "delete_team": "owner",      # delete or transfer the team
}


def rank(role: str | None) -> int:
    """0 for no role; 1-4 for viewer-owner."""
    return ROLES.index(role) + 1 if role in ROLES else 0


def role_in(session: Session, *, user_id: str, owner_id: str) -> str | None:
    """The caller's role in the workspace ``owner_id``: ``owner`` of their own, their membership's role in a
    team, None elsewhere."""
    if user_id and user_id == owner_id:
        return "owner"
    if not user_id:
        return None
    return session.scalar(select(TeamMember.role).where(TeamMember.team_id == owner_id,
                                                        TeamMember.user_id == user_id))


def allows(role: str | None, action: str) -> bool:
    return rank(role) >= rank(ACTIONS[action])


def can(session: Session, *, user_id: str, owner_id: str, action: str) -> bool:
    return allows(role_in(session, user_id=user_id, owner_id=owner_id), action)


def check(session: Session, *, user_id: str, owner_id: str, visibility: str, action: str, missing: str,
          read_only: str) -> str | None:
    """The one access decision for a workspace's thing: returns the caller's role there (None for a public
    thing of someone else's). Not theirs to see: ``NotFound(missing)``, as if it did not exist. Seen but not
    theirs to change: ``Forbidden(read_only)`` for an outsider on a public thing, or a 403 naming the role needed
    for a member whose role is too low."""
    role = role_in(session, user_id=user_id, owner_id=owner_id)
    if role is None and visibility != "public":
        raise NotFound(missing)
    if allows(role, action) or (action == "read" and visibility == "public"):
        return role
    if role is None:
        raise Forbidden(read_only)
    raise Forbidden(f"this needs the {ACTIONS[action]} role in the workspace (yours: {role})", code="role_required",
                    extra={"requiredRole": ACTIONS[action]})


def workspace_for(session: Session, *, user_id: str, username: str, owner: str | None,
                  action: str = "write") -> tuple[str, str]:
    """(owner id, owner name) of the workspace ``owner`` names (None: the caller's own) when the caller may
    ``action`` there: creating a dataset or project in a team takes an editor. Another person's workspace, or
    a team the caller is not in, is the 404 of one that does not exist."""
    if not owner or owner.lower() == username:
        return user_id, username
    team = session.scalar(select(User).where(User.username == owner.lower(), User.account_type == "team"))
    role = role_in(session, user_id=user_id, owner_id=team.id) if team is not None else None
    if team is None or role is None:
        raise NotFound(f"workspace '{owner}' not found")
    if not allows(role, action):
        raise Forbidden(f"this needs the {ACTIONS[action]} role in '{team.username}' (yours: {role})",
                        code="role_required", extra={"requiredRole": ACTIONS[action]})
    return team.id, team.username


def readable_owner(session: Session, *, user_id: str, owner_id: str) -> bool:
    """Whether the caller sees the private things of workspace ``owner_id`` (their own, or a team of theirs)."""
    return role_in(session, user_id=user_id, owner_id=owner_id) is not None
