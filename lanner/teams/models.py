"""Teams: a team is an account like a person's (a ``users`` row with ``account_type = "team"``), so its
username is an owner namespace (``ul://acme/datasets/x``, ``project=acme/p``) and everything a person can own
(datasets, projects, a ledger account, a tier) a team owns through the same ``owner_id``. What a team adds is who
may act in it: its members and their roles, single-use invitations, and an activity log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, id_column, utcnow


class TeamMember(Base):
    """One person's role in one team. ``monthly_budget_micros``: what the member may spend of the team's credit
    per calendar month (UTC), set by an admin; None is no limit."""

    __tablename__ = "team_members"
    __table_args__ = (UniqueConstraint("team_id", "user_id"),)

    id: Mapped[str] = id_column()
    team_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(10))
    monthly_budget_micros: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class TeamInvitation(Base):
    """A single-use link that makes whoever opens it (signed in) a member with ``role``, until ``expires_at``.
    Only the token's SHA-256 digest is kept, like API keys."""

    __tablename__ = "team_invitations"

    id: Mapped[str] = id_column()
    team_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(10))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_by_id: Mapped[str | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]
    used_by_id: Mapped[str | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))


class ActivityEvent(Base):
    """Who did what in a workspace, and when: ``action`` is a verb (``created``, ``deleted``, ``started``,
    ``cancelled``, ``role_changed``, ``topped_up``...), ``target`` what it was done to (``dataset acme/x``)."""

    __tablename__ = "activity_events"
    __table_args__ = (Index("ix_activity_events_owner_created", "owner_id", "created_at"),)

    id: Mapped[str] = id_column()
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    actor_id: Mapped[str | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    action: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(300))
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ResourceMove(Base):
    """Where a moved dataset or project used to live: ``ul://alice/datasets/x`` and ``alice/x`` keep answering
    for it after it moved to team ``acme`` (until something new takes the old name), so links, scripts and
    trainer commands written before the move still work."""

    __tablename__ = "resource_moves"
    __table_args__ = (Index("ix_resource_moves_from", "kind", "from_owner_id", "from_slug"),)

    id: Mapped[str] = id_column()
    kind: Mapped[str] = mapped_column(String(20))  # "dataset" or "project"
    from_owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    from_slug: Mapped[str] = mapped_column(String(128))
    resource_id: Mapped[str] = mapped_column(String(32))
    moved_at: Mapped[datetime] = mapped_column(default=utcnow)
