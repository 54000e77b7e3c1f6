"""Run-scoped API keys: every attempt of a run Lanner launched gets a fresh key that may report only for that run
(the previous attempt's is revoked), and a run's key is revoked once its worker is gone, evicted from the key
cache at once so it stops working before the cache would expire it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts import service as accounts_service
from lanner.accounts.models import ApiKey, User
from lanner.db import utcnow
from lanner.projects.models import ModelRecord
from lanner.training.models import Run


def issue_run_key(session: Session, run: Run, *, key_cache: dict) -> str:
    """Revoke the run's key and make a new one for its owner; returns the plaintext (never stored)."""
    user = session.scalar(select(User).join(ModelRecord, ModelRecord.owner_id == User.id)
                          .where(ModelRecord.id == run.model_id))
    assert user is not None
    revoke_run_key(session, run, key_cache=key_cache)
    key, plaintext = accounts_service.create_api_key(session, user=user, name=f"run-{run.id}", run_id=run.id)
    run.api_key_id = key.id
    return plaintext


def revoke_run_key(session: Session, run: Run, *, key_cache: dict) -> None:
    if run.api_key_id:
        key = session.get(ApiKey, run.api_key_id)
        if key is not None and key.revoked_at is None:
            key.revoked_at = utcnow()
            accounts_service.forget_cached_key(key_cache, key.digest)
