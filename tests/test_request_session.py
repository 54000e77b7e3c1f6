"""The request's unit of work: committed before the response is sent, so "200" means "stored"."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from lanner.accounts.models import User
from lanner.deps import DbSession


def test_a_commit_that_fails_is_the_requests_error_not_a_lost_write(app: Any, alice: Any) -> None:
    """The row below only fails at commit (a duplicate username, never flushed by the handler). Committing after
    the response (FastAPI's default for yield dependencies) would answer 200 for a write that was lost."""

    @app.post("/test/duplicate-user")
    def duplicate(session: DbSession) -> dict[str, bool]:
        session.add(User(username="alice", full_name="again", tier="free"))
        return {"ok": True}

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/test/duplicate-user")
    assert response.status_code == 500 and response.json()["code"] == "internal"
    with app.state.lanner.db.session() as session:
        assert session.query(User).filter_by(username="alice").count() == 1
