"""lanner.status: the one guarded status change for datasets, models and upload sessions."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.projects import service as projects_service
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
