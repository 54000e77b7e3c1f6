"""One place that changes a status: a guarded compare-and-set that also writes a ``StatusEvent``.

Runs have their own state machine and event table (``lanner.training.state``); every other row with a
``status`` column (datasets, models, upload sessions) changes it only through ``change_status``, with the
states it may come from, so two writers can never skip a state and every change leaves a trail:
``entity`` is the table name, ``entity_id`` the row's id.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, String, inspect, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from lanner.db import Base, utcnow


class StatusEvent(Base):
    __tablename__ = "status_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    entity: Mapped[str] = mapped_column(String(40))
    entity_id: Mapped[str] = mapped_column(String(64), index=True)
    from_status: Mapped[str | None] = mapped_column(String(20))
    to_status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def changed_row(self, session: Session) -> Any:
        """The row whose status this event records (None once it is gone): for the activity log, as the event is
        flushed. The row this process changed (``_event``) while it is still in ``session``: the session holds
        an unchanged row only weakly, so a caller that let go of it (an endpoint that answered from it) made
        the lookup a SELECT at every commit that wrote an event (issue 30: one in each upload call)."""
        row = self.__dict__.get("_row")
        if row is not None:
            state = inspect(row)
            if state.session is session and not state.deleted and not state.detached:
                return row
        for mapper in Base.registry.mappers:
            if mapper.class_.__tablename__ == self.entity:
                key = mapper.primary_key[0].type.python_type(self.entity_id)
                return session.get(mapper.class_, key)
        return None


class InvalidStatusChange(Exception):
    """The row was no longer in a state that allows the change (someone else moved it first)."""


def record_created(session: Session, row: Any, *, reason: str | None = None) -> None:
    """The first event of a new row: from nothing to its initial status."""
    session.flush()
    session.add(_event(row, from_status=None, to_status=row.status, reason=reason))


def change_status(session: Session, row: Any, to: str, *, allowed_from: Iterable[str], reason: str | None = None,
                  **values: Any) -> None:
    """Set ``row.status = to`` (and ``values``) if, and only if, its stored status is one of ``allowed_from``.

    Raises ``InvalidStatusChange`` otherwise; the row is refreshed either way, so the caller sees the truth."""
    table = type(row)
    key_column = inspect(table).primary_key[0]
    allowed = list(allowed_from)
    session.flush()
    result = session.execute(update(table).where(key_column == _key(row), table.status.in_(allowed))
                             .values(status=to, **values).execution_options(synchronize_session=False))
    from_status = row.status
    session.refresh(row)
    if result.rowcount != 1:
        raise InvalidStatusChange(f"{table.__tablename__} {_key(row)}: {row.status} -> {to} not allowed")
    if from_status != to:
        session.add(_event(row, from_status=from_status, to_status=to, reason=reason))


def try_change_status(session: Session, row: Any, to: str, *, allowed_from: Iterable[str],
                      reason: str | None = None, **values: Any) -> bool:
    try:
        change_status(session, row, to, allowed_from=allowed_from, reason=reason, **values)
    except InvalidStatusChange:
        return False
    return True


def _event(row: Any, **fields: Any) -> StatusEvent:
    event = StatusEvent(entity=row.__tablename__, entity_id=str(_key(row)), **fields)
    event._row = row  # not a column: the row itself, for ``changed_row`` while this session lasts
    return event


def _key(row: Any) -> Any:
    return inspect(row).identity[0] if inspect(row).identity else row.id
