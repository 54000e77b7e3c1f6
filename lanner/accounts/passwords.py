"""Signing in and changing a password: every place a password is checked or replaced.

The HTTP paths are async because a password hash (~50 ms of CPU) runs in ``security``'s own small pool, never
on the event loop nor in the threadpool other requests need. The database work around a hash is short and runs
in the ordinary threadpool, each step its own transaction, so no transaction (on SQLite: the write lock) stays
open while a hash is computed. Attempts are counted by ``ctx.limits`` before anything is hashed.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from lanner.accounts import service
from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.accounts.security import hash_password, hash_password_async, verify_password_async
from lanner.accounts.sessions import end_all_sessions, start_session
from lanner.context import AppContext
from lanner.db import Database
from lanner.errors import Forbidden, Unauthorized


@dataclass(frozen=True)
class SignedIn:
    username: str
    token: str  # for the session cookie; stored nowhere else


def _find(db: Database, username: str) -> User | None:
    with db.session() as session:
        return service.get_user_by_username(session, username=username)


def _start(db: Database, user_id: str) -> str:
    with db.session() as session:
        return start_session(session, user_id=user_id)


async def sign_in(ctx: AppContext, *, address: str, username: str, password: str) -> SignedIn:
    """A new web session for the right password; 401 otherwise, in the same time whether the username exists
    or not (an unknown user's password is checked against a stand-in hash), and 429 over the limits."""
    ctx.limits.sign_in_attempt(address, username)
    user = await run_in_threadpool(_find, ctx.db, username)
    right = await verify_password_async(password, user.password_hash if user is not None else None)
    if user is None or not right:
        raise Unauthorized("wrong username or password")
    return SignedIn(username=user.username, token=await run_in_threadpool(_start, ctx.db, user.id))


def replace_password(session: Session, *, user: User, password_hash: str) -> int:
    """Store a new password hash and sign the user out everywhere (their API keys keep working); returns how
    many sessions ended. The one way a password changes: the HTTP route and ``lanner users set-password``."""
    service.check_can_sign_in(user)
    user.password_hash = password_hash
    return end_all_sessions(session, user_id=user.id)


def set_password(session: Session, *, user: User, password: str) -> int:
    """For the CLI: the operator sets a password (hashed right here, no request is waiting)."""
    service.check_new_password(password)
    return replace_password(session, user=user, password_hash=hash_password(password))


async def change_password(ctx: AppContext, principal: Principal, *, address: str, current: str, new: str,
                          signed_in: bool) -> str | None:
    """A signed-in user's own change: the current password must be right (counted like a sign-in, so a stolen
    session cannot guess it quickly). Every session of the user ends; a caller that came with a session cookie
    gets a fresh session (its token is returned) so this browser stays signed in."""
    service.check_new_password(new)
    ctx.limits.sign_in_attempt(address, principal.username)

    def stored() -> str | None:
        with ctx.db.session() as session:
            user = session.get(User, principal.user_id)
            return user.password_hash if user is not None else None

    if not await verify_password_async(current, await run_in_threadpool(stored)):
        raise Forbidden("the current password is wrong")
    new_hash = await hash_password_async(new)

    def store() -> str | None:
        with ctx.db.session() as session:
            user = session.get(User, principal.user_id)
            if user is None:
                raise Unauthorized("this account no longer exists")
            replace_password(session, user=user, password_hash=new_hash)
            return start_session(session, user_id=user.id) if signed_in else None

    return await run_in_threadpool(store)
