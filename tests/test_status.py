"""lanner.status: the one guarded status change for datasets, models and upload sessions."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, select

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord
from lanner.status import InvalidStatusChange, StatusEvent, change_status, record_created, try_change_status


def _events(session: Any, row: Any) -> list[tuple[str | None, str, str | None]]:
    return [(e.from_status, e.to_status, e.reason) for e in session.scalars(
        select(StatusEvent).where(StatusEvent.entity == row.__tablename__, StatusEvent.entity_id == str(row.id))
        .order_by(StatusEvent.id))]


def test_a_change_is_guarded_and_leaves_an_event(app: Any) -> None:
    with app.state.lanner.db.session() as session:
        user = accounts_service.create_user(session, username="carol")
        principal = Principal.of(user)
        project = projects_service.create_project(session, principal, slug=None, name="p")
        model = projects_service.create_model(session, project, name="m")
        record_created(session, model, reason="created")
        change_status(session, model, "training", allowed_from=[model.status], reason="run 1")
        assert model.status == "training"
        with pytest.raises(InvalidStatusChange):
            change_status(session, model, "completed", allowed_from=["untrained"], reason="stale writer")
        assert model.status == "training"  # refreshed: the caller sees the stored state
        assert not try_change_status(session, model, "completed", allowed_from=["untrained"])
        assert try_change_status(session, model, "completed", allowed_from=["training"], reason="done")
        start = _events(session, model)[0][1]
        assert _events(session, model) == [(None, start, "created"), (start, "training", "run 1"),
                                           ("training", "completed", "done")]


def test_the_changed_row_is_not_looked_up_again_when_its_caller_let_go_of_it(app: Any) -> None:
    """The activity log asks each new event for its row as it is flushed (``changed_row``). The session holds an
    unchanged row only weakly: an endpoint that answered from the row and dropped it made that a SELECT at
    commit (one per upload call, issue 30); the event keeps the row it was made for."""
    db = app.state.lanner.db
    with db.session() as session:
        user = accounts_service.create_user(session, username="dora")
        project = projects_service.create_project(session, Principal.of(user), slug=None, name="p")
        model_id = projects_service.create_model(session, project, name="m").id
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    with db.session() as session:
        model = session.get(ModelRecord, model_id)
        assert model is not None
        change_status(session, model, "training", allowed_from=[model.status], reason="run")
        del model  # the caller answered and let go: nothing refers to the row but the event
        event.listen(db.engine, "before_cursor_execute", record)
        try:
            session.commit()
        finally:
            event.remove(db.engine, "before_cursor_execute", record)
    assert [s for s in statements if s.lstrip().upper().startswith("SELECT")] == []
    assert any(s.lstrip().upper().startswith("INSERT INTO STATUS_EVENTS") for s in statements)
    with db.read_session() as session:
        row = session.scalars(select(StatusEvent).where(StatusEvent.entity_id == model_id)).one()
        assert (row.to_status, row.reason, row.changed_row(session).id) == ("training", "run", model_id)
