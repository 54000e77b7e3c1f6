"""The web UI's session cookie: the user's id signed by the app's one signer (``value.expires.mac``), so no
server-side session table. Everything about the cookie lives here: its name, lifetime, how it is set and read."""

from __future__ import annotations

from fastapi import Response
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.service import Principal
from lanner.storage.signing import URLSigner

SESSION_COOKIE = "lanner_session"
SESSION_SECONDS = 14 * 24 * 3600
PURPOSE = "session"


def set_session_cookie(response: Response, signer: URLSigner, user_id: str) -> None:
    response.set_cookie(SESSION_COOKIE, signer.sign_value(PURPOSE, user_id, SESSION_SECONDS),
                        max_age=SESSION_SECONDS, httponly=True, samesite="lax",
                        secure=signer.public_url.startswith("https"))


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE)


def principal_from_cookie(session: Session, signer: URLSigner, cookie: str | None) -> Principal | None:
    user_id = signer.unsign_value(PURPOSE, cookie)
    user = session.get(User, user_id) if user_id else None
    return Principal.of(user) if user is not None else None
