"""The web UI's sessions: server-side rows (``web_sessions``) keyed by the SHA-256 digest of a random token that
only the browser's cookie holds. A signed cookie could not be taken back; a row can: logout deletes it, a
password change deletes all of the user's, and an expired one is refused (and deleted when it comes back, at
the user's next sign-in, or by the maintenance thread).
Everything about the cookie lives here: its name, lifetime, how it is set, read and ended."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from fastapi import Response
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User, WebSession
from lanner.accounts.principal import Principal
from lanner.db import utcnow

SESSION_COOKIE = "lanner_session"
SESSION_SECONDS = 14 * 24 * 3600
_TOKEN_MAX = 100  # a token is 43 characters; anything much longer is not ours and is not even hashed


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def start_session(session: Session, *, user_id: str) -> str:
    """A new session for ``user_id``; returns the token for the cookie (it is stored nowhere else). The user's
    expired sessions are deleted on the way, so the table holds about one row per signed-in browser."""
    now = utcnow()
    session.execute(delete(WebSession).where(WebSession.user_id == user_id, WebSession.expires_at <= now))
    token = secrets.token_urlsafe(32)
    session.add(WebSession(digest=_digest(token), user_id=user_id, created_at=now,
                           expires_at=now + timedelta(seconds=SESSION_SECONDS)))
    session.flush()
    return token


def principal_from_cookie(session: Session, cookie: str | None) -> Principal | None:
    """The signed-in user, or None for no cookie, an unknown or ended session, or an expired one (deleted)."""
    if not cookie or len(cookie) > _TOKEN_MAX:
        return None
    digest = _digest(cookie)
    row = session.execute(select(WebSession.expires_at, User).join(User, User.id == WebSession.user_id)
                          .where(WebSession.digest == digest)).first()
    if row is None:
        return None
    if row.expires_at <= utcnow():
        session.execute(delete(WebSession).where(WebSession.digest == digest))
        return None
    return Principal.of(row.User)


def end_session(session: Session, cookie: str | None) -> None:
    """Logout: the cookie's session stops working for everyone holding a copy of it."""
    if cookie and len(cookie) <= _TOKEN_MAX:
        session.execute(delete(WebSession).where(WebSession.digest == _digest(cookie)))


def end_all_sessions(session: Session, *, user_id: str) -> int:
    """Every browser signed in as ``user_id`` is signed out (a password change); API keys are unaffected."""
    return session.execute(delete(WebSession).where(WebSession.user_id == user_id)).rowcount or 0


def delete_expired_sessions(session: Session) -> int:
    """Expired sessions of browsers that never came back (run by the maintenance thread)."""
    return session.execute(delete(WebSession).where(WebSession.expires_at <= utcnow())).rowcount or 0


def set_session_cookie(response: Response, token: str, *, secure: bool) -> None:
    response.set_cookie(SESSION_COOKIE, token, max_age=SESSION_SECONDS, httponly=True, samesite="lax",
                        secure=secure)


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="lax")
