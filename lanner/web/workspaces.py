"""Which workspace a list page shows: the visitor's own, or a team of theirs named by ``?owner=``, and the
others they could switch to (``_workspaces.html``). A workspace the visitor is not in, a person's included, is
the 404 of one that does not exist (``teams.permissions.workspace_for``), so the switcher confirms no names."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.teams import service as teams_service
from lanner.teams.permissions import allows, workspace_for


def workspace(session: Session, user: Principal, owner: str | None) -> dict[str, Any]:
    """``owner`` (the workspace's name), ``role`` there, ``is_team``, ``can_write`` (may create there: an
    editor or above), and ``workspaces``: (name, label, role) of the visitor's own and each team's, for the
    switcher."""
    teams = teams_service.teams_of(session, user.user_id)
    _, name = workspace_for(session, user_id=user.user_id, username=user.username, owner=owner, action="read")
    role = "owner" if name == user.username else next(t["role"] for t in teams if t["username"] == name)
    return {"owner": name, "role": role, "is_team": name != user.username, "can_write": allows(role, "write"),
            "workspaces": [(user.username, f"{user.username} (personal)", "owner"),
                           *((t["username"], t["username"], t["role"]) for t in teams)]}


def trash_path(user: Principal, owner: str) -> str:
    """The trash page of workspace ``owner``: the visitor's own, or a team's (``?owner=``)."""
    owner = owner.lower()
    return "/datasets/trash" + (f"?{urlencode({'owner': owner})}" if owner and owner != user.username else "")
