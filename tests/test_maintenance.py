"""The maintenance thread the app starts: it purges datasets whose trash days are over (the trash's
``daysRemaining`` promise) and collects checkpoints, on its own, every LANNER_MAINTENANCE_INTERVAL_SECONDS."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lanner.accounts import service as accounts_service
from lanner.app import create_app
from lanner.config import Settings
from lanner.datasets import trash
from lanner.datasets.models import Dataset
from lanner.db import utcnow


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
