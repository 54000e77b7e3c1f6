"""Signed session cookies for the web UI: ``user_id.expires.hmac``; no server-side session table."""

from __future__ import annotations

import hashlib
import hmac
import time

from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.service import Principal
from lanner.context import AppContext

SESSION_SECONDS = 14 * 24 * 3600


def _mac(ctx: AppContext, payload: str) -> str:
    return hmac.new(ctx.settings.resolved_secret_key, b"session\n" + payload.encode(), hashlib.sha256).hexdigest()


def make_cookie(ctx: AppContext, user_id: str) -> str:
    payload = f"{user_id}.{int(time.time()) + SESSION_SECONDS}"
    return f"{payload}.{_mac(ctx, payload)}"


def principal_from_cookie(session: Session, ctx: AppContext, cookie: str | None) -> Principal | None:
    if not cookie or cookie.count(".") != 2:
        return None
    user_id, expires, mac = cookie.split(".")
    payload = f"{user_id}.{expires}"
    if not expires.isdigit() or int(expires) < time.time() or not hmac.compare_digest(mac, _mac(ctx, payload)):
        return None
    user = session.get(User, user_id)
    if user is None:
        return None
    return Principal(user_id=user.id, username=user.username, tier=user.tier, key_id=None)
