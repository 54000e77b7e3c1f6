"""Users and API keys. Plain functions, session first; the caller owns the transaction."""

from __future__ import annotations

import re
import time

from sqlalchemy import delete, exists, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lanner.accounts.models import ApiKey, Follow, User
from lanner.accounts.principal import Principal
from lanner.accounts.security import hash_password, key_digest, looks_like_api_key, new_api_key
from lanner.db import utcnow
from lanner.errors import BadRequest, Conflict, Forbidden, NotFound, Unauthorized

USERNAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
TIERS = ("free", "pro", "enterprise")
# Names that are pages of the site: a user's workspace is /{username}, so no user may take one.
RESERVED = {"api", "datasets", "settings", "login", "logout", "static", "admin", "explore", "new", "account",
            "projects", "gpus", "docs", "redoc", "teams", "invitations"}
# Owners that belong to the server, not to a person (``ultralytics`` holds the official models): nobody may
# register one, sign in as one or hold a key of one, so what they own is readable by all and writable by none.
SYSTEM_USERNAMES = frozenset({"ultralytics"})


def get_user_by_username(session: Session, *, username: str) -> User | None:
    return session.scalar(select(User).where(User.username == username.lower()))


def require_user(session: Session, *, username: str) -> User:
    user = get_user_by_username(session, username=username)
    if user is None:
        raise NotFound(f"user '{username}' not found")
    return user


def create_user(session: Session, *, username: str, password: str | None = None, tier: str = "free",
                full_name: str = "", is_admin: bool = False) -> User:
    username = username.strip().lower()
    if username in SYSTEM_USERNAMES:
        raise BadRequest(f"username '{username}' is reserved: it holds this server's official models")
    if not USERNAME_RE.match(username) or username in RESERVED:
        raise BadRequest(
            f"invalid username '{username}': use 1-40 lowercase letters, digits or inner hyphens"
        )
    if tier not in TIERS:
        raise BadRequest(f"unknown tier '{tier}': choose one of {', '.join(TIERS)}")
    if get_user_by_username(session, username=username):
        raise Conflict(f"user '{username}' already exists")
    if password is not None:
        check_new_password(password)
    user = User(username=username, full_name=full_name or username, tier=tier, is_admin=is_admin,
                password_hash=hash_password(password) if password else None)
    session.add(user)
    session.flush()
    return user


def ensure_system_user(session: Session, *, username: str, full_name: str) -> User:
    """The server's own owner ``username`` (one of ``SYSTEM_USERNAMES``), made on first use: no password, no
    keys. A person's account of that name (made before the name was reserved) is refused, never taken over."""
    assert username in SYSTEM_USERNAMES
    user = get_user_by_username(session, username=username)
    if user is None:
        user = User(username=username, full_name=full_name, tier="free")
        session.add(user)
        session.flush()
        return user
    has_key = session.scalar(select(ApiKey.id).where(ApiKey.user_id == user.id, ApiKey.revoked_at.is_(None))
                             .limit(1))
    if user.password_hash is not None or has_key is not None:
        raise Conflict(f"a person's account is named '{username}' (made before the name was reserved): rename "
                       f"or delete it before this server can hold official models")
    return user


def check_can_sign_in(user: User) -> None:
    """Only people sign in or hold keys: never the server's own owners (``SYSTEM_USERNAMES``), never a team (its
    members act in it with their own keys)."""
    if user.account_type == "team":
        raise Forbidden(f"'{user.username}' is a team: its members sign in as themselves")
    if user.username in SYSTEM_USERNAMES:
        raise Forbidden(f"'{user.username}' holds this server's official models: nobody can sign in as it or "
                        f"hold its keys")


def check_new_password(password: str) -> None:
    if len(password) < 8:
        raise BadRequest("password must be at least 8 characters")


def create_api_key(session: Session, *, user: User, name: str = "default",
                   run_id: int | None = None) -> tuple[ApiKey, str]:
    """Returns the row and the plaintext key; the plaintext is never stored. A team holds run-scoped keys only
    (its runs' workers report with them); its members use their own."""
    if not (run_id is not None and user.account_type == "team"):
        check_can_sign_in(user)
    plaintext = new_api_key()
    key = ApiKey(user_id=user.id, name=name[:100] or "default", prefix=plaintext[:7],
                 digest=key_digest(plaintext), created_at=utcnow(), run_id=run_id)
    session.add(key)
    session.flush()
    return key, plaintext


def list_api_keys(session: Session, *, user_id: str) -> list[ApiKey]:
    return list(session.scalars(
        select(ApiKey).where(ApiKey.user_id == user_id, ApiKey.revoked_at.is_(None), ApiKey.run_id.is_(None))
        .order_by(ApiKey.created_at)
    ))


def revoke_api_key(session: Session, *, user_id: str, key_id: str, cache: dict | None = None) -> None:
    key = session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.user_id == user_id))
    if key is None or key.revoked_at is not None:
        raise NotFound("API key not found")
    key.revoked_at = utcnow()
    if cache is not None:
        cache.pop(key.digest, None)


def forget_cached_key(cache: dict, digest: str) -> None:
    """Evict a key from the principal cache (by its digest), so a revoked key stops working at once."""
    cache.pop(digest, None)


def cached_principal(*, key: str, cache: dict) -> Principal | None:
    """The principal for ``key`` if it was verified within the cache's lifetime; no database access."""
    hit = cache.get(key_digest(key))
    if hit and hit[0] > time.monotonic():
        return hit[1]
    return None


def authenticate_key(session: Session, *, key: str, cache: dict, ttl: float) -> Principal:
    if not looks_like_api_key(key):
        raise Unauthorized("invalid API key")
    digest = key_digest(key)
    now = time.monotonic()
    hit = cache.get(digest)
    if hit and hit[0] > now:
        return hit[1]  # type: ignore[return-value]
    row = session.execute(
        select(ApiKey.id, User.id, User.username, User.tier, ApiKey.run_id, User.is_admin)
        .join(User, User.id == ApiKey.user_id)
        .where(ApiKey.digest == digest, ApiKey.revoked_at.is_(None))
    ).first()
    if row is None:
        cache.pop(digest, None)
        raise Unauthorized("invalid or revoked API key")
    principal = Principal(user_id=row[1], username=row[2], tier=row[3], key_id=row[0], run_id=row[4],
                          is_admin=bool(row[5]))
    cache[digest] = (now + ttl, principal)
    return principal


# --- follows (``account.follow``; ``account.profile`` reads them back) -------------------------------------------

def follower_count(session: Session, user_id: str) -> int:
    return int(session.scalar(select(func.count()).select_from(Follow).where(Follow.followed_id == user_id)) or 0)


def follows(session: Session, *, follower_id: str, followed_id: str) -> bool:
    return bool(session.scalar(select(exists().where(Follow.follower_id == follower_id,
                                                     Follow.followed_id == followed_id))))


def set_follow(session: Session, *, follower_id: str, followed: User, follow: bool) -> int:
    """Follow (``follow``) or unfollow ``followed``; idempotent either way. Returns its follower count."""
    if followed.id == follower_id:
        raise BadRequest("you cannot follow yourself")
    if follow and not follows(session, follower_id=follower_id, followed_id=followed.id):
        try:
            with session.begin_nested():
                session.add(Follow(follower_id=follower_id, followed_id=followed.id))
        except IntegrityError:
            pass  # a concurrent request of the same caller followed first: followed all the same
    elif not follow:
        session.execute(delete(Follow).where(Follow.follower_id == follower_id, Follow.followed_id == followed.id))
    return follower_count(session, followed.id)
