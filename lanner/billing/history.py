"""The ledger as a person reads it (the account page): a page of transactions with the balance after each, the
holds of queued and running runs, what each run cost, and spend per day; and, for the operator, what runs on a
GPU type paid (per day and in all). Reads only; amounts in micro-dollars.

Spend is what went to ``revenue`` because of the user's transactions: charges minus refunds. Holds are not
spend (they come back when a run settles)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.billing import service
from lanner.billing.models import HELD, REVENUE, LedgerPosting, LedgerTransaction
from lanner.db import utcnow


@dataclass(frozen=True)
class Entry:
    transaction: LedgerTransaction
    change: int  # of the user's balance (available + held); a hold moves credit without changing it
    available_change: int
    balance_after: int


@dataclass(frozen=True)
class RunAmount:
    """A run's hold (``active_holds``) or its net charge (``run_costs``)."""

    run_id: int
    model_id: str | None
    gpu_type: str | None
    micros: int
    first_at: datetime
    last_at: datetime


def transaction_count(session: Session, *, user_id: str) -> int:
    return int(session.scalar(select(func.count()).select_from(LedgerTransaction)
                              .where(LedgerTransaction.user_id == user_id)) or 0)


def _change_of_newest(session: Session, user_id: str, count: int) -> int:
    """How much the ``count`` newest transactions changed the user's balance (only the user's own accounts,
    available and held, carry the user's id on their postings)."""
    if count <= 0:
        return 0
    newest = (select(LedgerTransaction.id).where(LedgerTransaction.user_id == user_id)
              .order_by(*service.NEWEST_FIRST).limit(count).subquery())
    return int(session.scalar(select(func.coalesce(func.sum(LedgerPosting.amount_micros), 0)).where(
        LedgerPosting.transaction_id.in_(select(newest.c.id)), LedgerPosting.user_id == user_id)) or 0)


def transaction_page(session: Session, *, user_id: str, offset: int, limit: int) -> list[Entry]:
    """Transactions ``offset`` to ``offset + limit`` (newest first), each with the balance right after it."""
    rows = service.transactions(session, user_id=user_id, limit=limit, offset=offset)
    balance = service.balance_micros(session, user_id=user_id) - _change_of_newest(session, user_id, offset)
    entries = []
    for row, change, available_change in rows:
        entries.append(Entry(row, change, available_change, balance))
        balance -= change
    return entries


def _per_run(session: Session, user_id: str, account: str) -> list[RunAmount]:
    total = func.sum(LedgerPosting.amount_micros)
    stmt = (select(LedgerTransaction.run_id, func.max(LedgerTransaction.model_id), func.max(LedgerTransaction.gpu_type),
                   total, func.min(LedgerTransaction.created_at), func.max(LedgerTransaction.created_at))
            .join(LedgerPosting, LedgerPosting.transaction_id == LedgerTransaction.id)
            .where(LedgerTransaction.user_id == user_id, LedgerTransaction.run_id.is_not(None),
                   LedgerPosting.account == account)
            .group_by(LedgerTransaction.run_id).having(total != 0))
    return [RunAmount(int(run_id), model_id, gpu, int(micros), first, last)
            for run_id, model_id, gpu, micros, first, last in session.execute(stmt)]


def active_holds(session: Session, *, user_id: str) -> list[RunAmount]:
    """Credit reserved for the user's queued and running runs, newest first."""
    holds = [h for h in _per_run(session, user_id, HELD) if h.micros > 0]
    return sorted(holds, key=lambda h: h.last_at, reverse=True)


def run_costs(session: Session, *, user_id: str, limit: int = 20) -> list[RunAmount]:
    """Net charge of each run (charges minus refunds), most recently charged first."""
    costs = sorted(_per_run(session, user_id, REVENUE), key=lambda c: c.last_at, reverse=True)
    return costs[:limit]


def daily_spend(session: Session, *, user_id: str, days: int = 30, now: datetime | None = None
                ) -> list[tuple[date, int]]:
    """Spend per UTC day over the last ``days`` days, oldest first, every day present (0 when nothing)."""
    today = (now or utcnow()).astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    per_day = {first + timedelta(days=i): 0 for i in range(days)}
    stmt = (select(LedgerTransaction.created_at, LedgerPosting.amount_micros)
            .join(LedgerPosting, LedgerPosting.transaction_id == LedgerTransaction.id)
            .where(LedgerTransaction.user_id == user_id, LedgerPosting.account == REVENUE,
                   LedgerTransaction.created_at >= start))
    for created, micros in session.execute(stmt):
        day = created.astimezone(UTC).date()
        if day in per_day:
            per_day[day] += int(micros)
    return sorted(per_day.items())


def revenue_per_day(session: Session, *, gpu_types: list[str], days: int = 30, now: datetime | None = None
                    ) -> dict[str, dict[date, int]]:
    """What runs on each of ``gpu_types`` paid per UTC day over the last ``days`` days, every day present (0 when
    nothing): the ``revenue`` postings of transactions that name the type (training charges, minus refunds),
    whoever paid. The operator's side of ``daily_spend``."""
    today = (now or utcnow()).astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    per_type = {gpu: {first + timedelta(days=i): 0 for i in range(days)} for gpu in gpu_types}
    if not gpu_types:
        return per_type
    stmt = (select(LedgerTransaction.gpu_type, LedgerTransaction.created_at, LedgerPosting.amount_micros)
            .join(LedgerPosting, LedgerPosting.transaction_id == LedgerTransaction.id)
            .where(LedgerTransaction.gpu_type.in_(gpu_types), LedgerPosting.account == REVENUE,
                   LedgerTransaction.created_at >= start))
    for gpu, created, micros in session.execute(stmt):
        day = created.astimezone(UTC).date()
        if day in per_type[gpu]:
            per_type[gpu][day] += int(micros)
    return per_type


def revenue_total(session: Session, *, gpu_types: list[str]) -> dict[str, int]:
    """What runs on each of ``gpu_types`` ever paid (charges minus refunds), 0 for a type never charged."""
    totals = dict.fromkeys(gpu_types, 0)
    if gpu_types:
        rows = session.execute(
            select(LedgerTransaction.gpu_type, func.coalesce(func.sum(LedgerPosting.amount_micros), 0))
            .join(LedgerPosting, LedgerPosting.transaction_id == LedgerTransaction.id)
            .where(LedgerTransaction.gpu_type.in_(gpu_types), LedgerPosting.account == REVENUE)
            .group_by(LedgerTransaction.gpu_type))
        totals.update({gpu: int(micros or 0) for gpu, micros in rows})
    return totals
