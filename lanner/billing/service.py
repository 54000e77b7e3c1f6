"""Ledger reads and writes. Amounts are integer micro-dollars; cents are shown rounded down."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.billing.models import LedgerEntry
from lanner.errors import BadRequest

MICROS_PER_DOLLAR = 1_000_000
MICROS_PER_CENT = 10_000


def dollars_to_micros(usd: float | str | Decimal) -> int:
    try:
        amount = Decimal(str(usd))
    except ArithmeticError as exc:
        raise BadRequest(f"not an amount of dollars: {usd!r}") from exc
    if not amount.is_finite():
        raise BadRequest(f"not an amount of dollars: {usd!r}")
    return int((amount * MICROS_PER_DOLLAR).to_integral_value(rounding=ROUND_HALF_UP))


def micros_to_cents(micros: int) -> int:
    """Floor division: a balance is never shown higher than it is."""
    return micros // MICROS_PER_CENT


def balance_micros(session: Session, *, user_id: str) -> int:
    total = session.scalar(select(func.coalesce(func.sum(LedgerEntry.amount_micros), 0)).where(
        LedgerEntry.user_id == user_id
    ))
    return int(total or 0)


def top_up(session: Session, *, user_id: str, micros: int, description: str = "Top-up",
           idempotency_key: str | None = None) -> LedgerEntry:
    if micros <= 0:
        raise BadRequest("a top-up must be a positive amount")
    entry = LedgerEntry(user_id=user_id, amount_micros=micros, kind="topup", description=description,
                        idempotency_key=idempotency_key)
    session.add(entry)
    session.flush()
    return entry
