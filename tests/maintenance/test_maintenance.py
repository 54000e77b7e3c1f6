"""The maintenance thread the app starts: it purges datasets whose trash days are over (the trash's
``daysRemaining`` promise) and collects checkpoints, on its own, every LANNER_MAINTENANCE_INTERVAL_SECONDS."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, event, insert, select
from sqlalchemy.orm import Session

from lanner.accounts import service as accounts_service
from lanner.app import create_app
from lanner.config import Settings
from lanner.datasets import trash
from lanner.datasets.models import Dataset
from lanner.db import Base, utcnow
from lanner.storage.references import BLOB_REFERENCES, REFERENCE_CHUNK, referenced_among


def test_the_app_purges_expired_trash_by_itself(tmp_path: Path, database_url: str) -> None:
    settings = Settings(home=tmp_path / "home", database_url=database_url, secret_key="s", public_url="http://t",
                        supervisor_interval_seconds=0, maintenance_interval_seconds=0.2)
    app = create_app(settings)
    with TestClient(app) as client:
        with app.state.lanner.db.session() as session:
            user = accounts_service.create_user(session, username="dora")
            _, key = accounts_service.create_api_key(session, user=user)
        headers = {"Authorization": f"Bearer {key}"}
        for slug in ("old", "recent"):
            assert client.post("/api/datasets", headers=headers, json={"name": slug}).status_code == 201
            assert client.delete(f"/api/datasets/dora/{slug}", headers=headers).status_code == 200
        with app.state.lanner.db.session() as session:
            old = session.scalar(select(Dataset).where(Dataset.slug == "old"))
            old.deleted_at = utcnow() - timedelta(days=trash.TRASH_DAYS, minutes=1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            items = client.get("/api/trash", headers=headers).json()["items"]
            if [item["slug"] for item in items] == ["recent"]:
                break
            time.sleep(0.1)
        assert [item["slug"] for item in items] == ["recent"]
    app.state.lanner.db.dispose()


def test_a_pass_reports_each_job(app: Any) -> None:
    result = app.state.maintenance.run_once()
    assert result.purged_datasets == 0
    assert result.checkpoints is not None and result.checkpoints.uploads == 0


def _row_holding(table: Any, column: Any, digest: str) -> dict[str, Any]:
    """A row of ``table`` with ``digest`` in ``column`` and a placeholder in every other required column (text
    placeholders differ per row: a table with two blob columns gets two rows, which a unique key must allow)."""
    placeholders = {str: f"x{digest[-6:]}", int: 1, float: 1.0, bool: False, datetime: utcnow(), dict: {}, list: []}
    row: dict[str, Any] = {}
    for other in table.columns:
        if other.nullable or other.default is not None or other.server_default is not None:
            continue
        row[other.name] = placeholders[other.type.python_type]
    return {**row, column.name: digest}


def test_referenced_among_asks_every_blob_column_in_one_query_per_chunk() -> None:
    import lanner.models_registry  # noqa: F401  (every table on the metadata)

    engine = create_engine("sqlite://")
    columns = [Base.metadata.tables[table].c[column] for table, column in BLOB_REFERENCES]
    tables = list(dict.fromkeys(column.table for column in columns))
    Base.metadata.create_all(engine, tables=tables)  # SQLite leaves foreign keys unchecked: one row per column
    held = {f"{i:064x}" for i in range(len(columns))}
    with engine.begin() as connection:
        for column, digest in zip(columns, sorted(held), strict=True):
            connection.execute(insert(column.table).values(_row_holding(column.table, column, digest)))
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    free = [f"{i:064x}" for i in range(1000, 1000 + 2 * REFERENCE_CHUNK)]
    with Session(engine) as session:
        assert referenced_among(session, [*free, *held]) == held  # each column is asked
        assert len(statements) == 3  # 2 * REFERENCE_CHUNK + 8 digests: three chunks, one query each
        assert referenced_among(session, []) == set() and len(statements) == 3
    engine.dispose()
