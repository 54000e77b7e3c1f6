"""The activity log's one writer for resource actions: a ``before_flush`` hook on every ORM session.

Why a hook and not a call in each service: a team's things are created, deleted, trashed, started and cancelled
from dozens of places (API routes, web pages, clones, the CLI, the supervisor), and a log that each of them has to
remember to write is a log with holes. A table takes part by declaring, on its mapped class:

- ``__activity__ = "dataset"``: what the thing is called in the log;
- optionally ``activity_subject(session) -> (owner_id, name)`` when it has no ``owner_id``/``slug`` of its own
  (a run names its model), and ``__activity_statuses__ = {"cancelled": "cancelled"}``: the status changes worth
  a line (read from the event row a status change adds), mapped to the verb written.

Created, deleted, moved to the trash (``deleted_at`` set) and restored are written for every such class; only
workspaces that are teams get lines (a person's own doings in their own workspace need no audit trail). The actor
is ``lanner.db.set_actor``'s, which the request's principal dependency sets on the request's session; work
nobody asked for in a request (the supervisor stopping a run) is written without one ("system").
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.db import ACTOR_KEY
from lanner.teams.models import ActivityEvent


def _subject(session: Session, obj: Any) -> tuple[str, str] | None:
    subject = getattr(obj, "activity_subject", None)
    if subject is not None:
        return subject(session)
    owner_id, slug = getattr(obj, "owner_id", None), getattr(obj, "slug", None)
    return (owner_id, slug) if owner_id and slug else None


def _changed(obj: Any, attribute: str) -> tuple[Any, Any] | None:
    """(old, new) when ``attribute`` was changed in this flush, else None."""
    state = inspect(obj)
    if attribute not in state.attrs:
        return None
    history = state.attrs[attribute].history
    if not history.added:
        return None
    return (history.deleted[0] if history.deleted else None), history.added[0]


def _verbs(session: Session, obj: Any) -> list[str]:
    if obj in session.new:
        return ["started" if getattr(obj, "__activity__", "") == "run" else "created"]
    if obj in session.deleted:
        return ["deleted"]
    verbs = []
    trashed = _changed(obj, "deleted_at")
    if trashed is not None:
        verbs.append("restored" if trashed[1] is None else "deleted")
    return verbs


def _status_changes(session: Session) -> list[tuple[Any, str]]:
    """(row, verb) for the status changes in this flush that the row's class wants a line for. A status changes
    in one place per domain (``lanner.status.change_status``, ``training.state.transition``): a compare-and-set
    UPDATE that leaves no attribute history but adds an event row with ``to_status`` and ``changed_row()``."""
    found = []
    for event_row in session.new:
        changed_row = getattr(event_row, "changed_row", None)
        if changed_row is None:
            continue
        row = changed_row(session)
        verb = (getattr(type(row), "__activity_statuses__", None) or {}).get(event_row.to_status)
        if verb is not None:
            found.append((row, verb))
    return found


def _before_flush(session: Session, _context: Any, _instances: Any) -> None:
    with session.no_autoflush:
        _write(session)


def _write(session: Session) -> None:
    teams: dict[str, User | None] = {}
    changes = [(obj, _verbs(session, obj)) for obj in [*session.new, *session.deleted, *session.dirty]
               if getattr(obj, "__activity__", None) is not None]
    changes += [(row, [verb]) for row, verb in _status_changes(session)]
    for obj, verbs in changes:
        kind = obj.__activity__
        if not verbs:
            continue
        subject = _subject(session, obj)
        if subject is None:
            continue
        owner_id, name = subject
        if owner_id not in teams:
            owner = session.get(User, owner_id)
            teams[owner_id] = owner if owner is not None and owner.account_type == "team" else None
        team = teams[owner_id]
        if team is None:
            continue
        actor = session.info.get(ACTOR_KEY) or (getattr(obj, "started_by_id", None) if obj in session.new else None)
        for verb in verbs:
            session.add(ActivityEvent(owner_id=owner_id, actor_id=actor, action=verb,
                                      target=f"{kind} {team.username}/{name}"[:300], detail={}))


event.listen(Session, "before_flush", _before_flush)
