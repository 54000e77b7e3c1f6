"""The credit ledger, double-entry: a transaction moves integer micro-dollars between accounts, and its
postings always sum to zero. Balances are sums of postings, never stored numbers; rows are never updated.

Accounts: ``available`` and ``held`` belong to a user; ``revenue``, ``funding`` and ``transfers`` belong to the
operator (``funding`` is where top-ups come from, so it goes negative by exactly what users were given;
``transfers`` is what a move of credit between two users passes through: each move's two transactions, one per
user's ledger, net it back to zero)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, id_column, utcnow

AVAILABLE = "available"
HELD = "held"
REVENUE = "revenue"
FUNDING = "funding"
TRANSFERS = "transfers"
ACCOUNTS = (AVAILABLE, HELD, REVENUE, FUNDING, TRANSFERS)


class LedgerTransaction(Base):
    __tablename__ = "ledger_transactions"

    id: Mapped[str] = id_column()
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(20))  # topup, hold, charge, release, refund, transfer
    description: Mapped[str] = mapped_column(String(300), default="")
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    model_id: Mapped[str | None] = mapped_column(String(32))
    gpu_type: Mapped[str | None] = mapped_column(String(64))
    # A retried write carries the same key; the unique index turns a repeat into a no-op.
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class LedgerPosting(Base):
    __tablename__ = "ledger_postings"
    __table_args__ = (Index("ix_ledger_postings_user_account", "user_id", "account"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    transaction_id: Mapped[str] = mapped_column(ForeignKey("ledger_transactions.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[str | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    account: Mapped[str] = mapped_column(String(20))
    amount_micros: Mapped[int] = mapped_column(BigInteger)
