"""Users (a user's username is its workspace slug), their API keys and their web sessions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from lanner.db import Base, TimestampMixin, id_column, utcnow


class User(TimestampMixin, Base):
    __tablename__ = "users"

    id: Mapped[str] = id_column()
    username: Mapped[str] = mapped_column(String(64), unique=True)
    full_name: Mapped[str] = mapped_column(String(200), default="")
    password_hash: Mapped[str | None] = mapped_column(String(300))
    tier: Mapped[str] = mapped_column(String(20), default="free")
    is_admin: Mapped[bool] = mapped_column(default=False)
    # "personal" (a person), or "team" (lanner/teams: an account that owns things, with members; nobody signs
    # in as a team or holds its keys).
    account_type: Mapped[str] = mapped_column(String(10), default="personal", server_default="personal")

    api_keys: Mapped[list[ApiKey]] = relationship(back_populates="user", cascade="all, delete-orphan")


class ApiKey(Base):
    """A key is shown once; only its SHA-256 digest is kept, so lookup is one indexed equality."""

    __tablename__ = "api_keys"

    id: Mapped[str] = id_column()
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]
    # A run-scoped key (handed to one training worker) may only report for that run and read what it needs.
    run_id: Mapped[int | None]

    user: Mapped[User] = relationship(back_populates="api_keys")


class WebSession(Base):
    """A signed-in browser. The cookie holds a random token and only its SHA-256 digest is kept (like API keys),
    so a database leak hands out no session; deleting the row (logout, password change) ends it at once."""

    __tablename__ = "web_sessions"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class Follow(Base):
    """``account.follow``: ``follower_id`` follows ``followed_id`` (a user or a team); ``account.profile`` reads
    it back as ``followerCount`` and ``isFollowed``. Following notifies nobody and grants nothing."""

    __tablename__ = "follows"

    follower_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    followed_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True,
                                             index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
