"""Moving a dataset or project to another workspace (a person's into a team's, or back), keeping its id, and so
its runs, versions, images and every link made of ids, and leaving its old address answering for it.

Who may: an admin of the workspace it leaves (a person is the owner of their own), since moving a thing out
takes it from every member there; and an editor of the workspace it joins. What moves with the row (models,
exports, import jobs) is the caller's business: each domain knows its own children.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.errors import BadRequest, Conflict
from lanner.teams import permissions
from lanner.teams.models import ResourceMove
from lanner.teams.service import record


def moved_to(session: Session, kind: str, owner: str, slug: str) -> str | None:
    """The id of the ``kind`` that lived at ``owner/slug`` before it moved (the latest move), if any."""
    return session.scalar(select(ResourceMove.resource_id).join(User, User.id == ResourceMove.from_owner_id)
                          .where(ResourceMove.kind == kind, User.username == owner.lower(),
                                 ResourceMove.from_slug == slug)
                          .order_by(ResourceMove.moved_at.desc(), ResourceMove.id.desc()).limit(1))


def move(session: Session, actor: Principal, row: Any, *, kind: str, to_owner: str,
         slug_taken: Any) -> tuple[str, str]:
    """Give ``row`` (with ``id``, ``owner_id``, ``slug``, ``visibility``) to workspace ``to_owner``; returns
    (the old owner's name, the new one's). ``slug_taken(owner_id, slug)`` says whether the target already has
    one of that name (a 409: nothing is renamed behind the caller's back)."""
    old_owner = session.get(User, row.owner_id)
    old_name = old_owner.username if old_owner is not None else "?"
    where = f"{kind} '{old_name}/{row.slug}'"
    permissions.check(session, user_id=actor.user_id, owner_id=row.owner_id, visibility=row.visibility,
                      action="transfer", missing=f"{where} not found", read_only=f"{where} is not yours to move")
    new_id, new_name = permissions.workspace_for(session, user_id=actor.user_id, username=actor.username,
                                                 owner=to_owner, action="write")
    if new_id == row.owner_id:
        raise BadRequest(f"{where} is already in '{new_name}'")
    if slug_taken(new_id, row.slug):
        raise Conflict(f"'{new_name}' already has a {kind} named '{row.slug}': rename one of them first")
    session.add(ResourceMove(kind=kind, from_owner_id=row.owner_id, from_slug=row.slug, resource_id=row.id))
    old_owner_id, row.owner_id = row.owner_id, new_id
    for owner_id, action in ((old_owner_id, "moved_out"), (new_id, "moved_in")):
        workspace = session.get(User, owner_id)
        if workspace is None or workspace.account_type != "team":
            continue  # the activity log is a team's (lanner/teams/activity.py)
        record(session, owner_id=owner_id, actor_id=actor.user_id, action=action, target=f"{kind} {row.slug}",
               detail={"from": old_name, "to": new_name})
    session.flush()
    return old_name, new_name
