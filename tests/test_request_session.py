"""The request's unit of work: committed before the response is sent, so "200" means "stored"."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from lanner import db
from lanner.accounts.models import User
from lanner.http.deps import DbSession


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


def test_a_transaction_that_holds_the_write_lock_long_is_logged_with_where(tmp_path: Any, monkeypatch: Any,
                                                                          caplog: Any) -> None:
    """Every SQLite transaction takes the write lock: one held for long stalls every request behind it (a
    first-hour CI run timed out a GET after 30 s). The log says so, and from where, so it can be found."""
    database = db.Database(f"sqlite:///{tmp_path / 'lock.db'}")
    monkeypatch.setattr(db, "SLOW_TRANSACTION_SECONDS", 2.0)
    with caplog.at_level("WARNING", logger="lanner.db"):
        with database.session() as session:
            session.connection()  # begins: the lock is taken, and released at once
        with database.session() as session:
            session.connection()
            deadline = time.monotonic() + 2.1
            while time.monotonic() < deadline:  # slow work inside the transaction, holding the lock
                pass
    database.dispose()
    slow = [r for r in caplog.records if "write lock" in r.getMessage()]
    assert len(slow) == 1, [r.getMessage() for r in caplog.records]
    assert "test_request_session.py" in (slow[0].stack_info or "")


def test_a_read_session_neither_waits_for_nor_takes_the_write_lock(tmp_path: Any) -> None:
    """The blob route reads with ``read_session``: while another transaction holds SQLite's write lock (every
    ``session()`` does), it still answers, where a ``session()`` would wait up to the 30 s busy timeout; and a
    write through it is refused rather than taking the lock."""
    import pytest
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from lanner.db.migrate import upgrade_database

    url = f"sqlite:///{tmp_path / 'read.db'}"
    upgrade_database(url)
    database = db.Database(url)
    with database.session() as writer:
        writer.add(User(username="alice", full_name="Alice", tier="free"))
        writer.flush()  # the write lock is held until this block ends
        with database.read_session() as reader:
            assert reader.scalar(text("SELECT count(*) FROM users")) == 0  # the last committed state
            with pytest.raises(OperationalError, match="readonly|read-only|query_only"):
                reader.execute(text("DELETE FROM users"))
    with database.read_session() as reader:
        assert reader.scalar(text("SELECT username FROM users")) == "alice"
    database.dispose()
