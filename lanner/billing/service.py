"""Ledger reads and writes. Amounts are integer micro-dollars (a one-second charge is exact); cents are shown
as ``micros / 10_000`` where the wire allows fractions and rounded down where it wants an integer.

Every write goes through ``post``: it locks the user's row (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite
transactions are already serialised by ``BEGIN IMMEDIATE``), skips a repeated idempotency key, and refuses a
transaction whose postings do not sum to zero. So concurrent starts cannot both spend the same credit, and a
retried settlement cannot charge twice."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.billing.models import AVAILABLE, FUNDING, HELD, REVENUE, TRANSFERS, LedgerPosting, LedgerTransaction
from lanner.db import ACTOR_KEY
from lanner.errors import BadRequest, PaymentRequired
from lanner.teams import service as teams_service

MICROS_PER_DOLLAR = 1_000_000
MICROS_PER_CENT = 10_000
# The ledger's order, newest first; the id breaks ties, so pages of it never skip or repeat a transaction.
NEWEST_FIRST = (LedgerTransaction.created_at.desc(), LedgerTransaction.id.desc())


def dollars_to_micros(usd: float | str | Decimal) -> int:
    try:
        amount = Decimal(str(usd))
    except ArithmeticError as exc:
        raise BadRequest(f"not an amount of dollars: {usd!r}") from exc
    if not amount.is_finite():
        raise BadRequest(f"not an amount of dollars: {usd!r}")
    return int((amount * MICROS_PER_DOLLAR).to_integral_value(rounding=ROUND_HALF_UP))


def cents_to_micros(cents: float) -> int:
    return dollars_to_micros(Decimal(str(cents)) / 100)


def micros_to_cents(micros: int) -> int:
    """Floor division: a balance is never shown higher than it is."""
    return micros // MICROS_PER_CENT


def micros_to_fractional_cents(micros: int) -> float:
    return micros / MICROS_PER_CENT


def format_cents(micros: int) -> str:
    """``$1.23`` for display, rounded up: an estimate is never shown lower than what may be held."""
    cents = -(-micros // MICROS_PER_CENT)
    return f"${cents // 100}.{cents % 100:02d}"


@dataclass(frozen=True)
class Balances:
    available: int
    held: int

    @property
    def total(self) -> int:
        return self.available + self.held


def lock_user(session: Session, user_id: str) -> None:
    """Serialise everything that moves ``user_id``'s money. ``FOR NO KEY UPDATE`` (PostgreSQL; SQLite's one
    writer serialises anyway) and not ``FOR UPDATE``: the row's key never changes, and the foreign-key checks of
    rows the same transaction inserted first (a run's model, an activity line naming the team) hold ``KEY SHARE``
    on it, which ``FOR UPDATE`` waits for: two starts against one team deadlocked that way. SQLAlchemy renders
    ``key_share=True`` without ``read`` as ``FOR NO KEY UPDATE``."""
    session.execute(select(User.id).where(User.id == user_id).with_for_update(key_share=True))


def balances(session: Session, *, user_id: str) -> Balances:
    rows = session.execute(
        select(LedgerPosting.account, func.coalesce(func.sum(LedgerPosting.amount_micros), 0))
        .where(LedgerPosting.user_id == user_id, LedgerPosting.account.in_((AVAILABLE, HELD)))
        .group_by(LedgerPosting.account)
    ).all()
    amounts = {account: int(total) for account, total in rows}
    return Balances(available=amounts.get(AVAILABLE, 0), held=amounts.get(HELD, 0))


def balance_micros(session: Session, *, user_id: str) -> int:
    """What the user owns: available plus what is held for running jobs."""
    return balances(session, user_id=user_id).total


def _run_posting_sum(session: Session, run_id: int, account: str) -> int:
    stmt = (select(func.coalesce(func.sum(LedgerPosting.amount_micros), 0))
            .join(LedgerTransaction, LedgerTransaction.id == LedgerPosting.transaction_id)
            .where(LedgerTransaction.run_id == run_id, LedgerPosting.account == account))
    return int(session.scalar(stmt) or 0)


def run_held(session: Session, run_id: int) -> int:
    return _run_posting_sum(session, run_id, HELD)


def run_charged(session: Session, run_id: int) -> int:
    """Net charges of a run (charges minus refunds): what went to revenue because of it."""
    return _run_posting_sum(session, run_id, REVENUE)


def runs_charged(session: Session, run_ids: list[int]) -> dict[int, int]:
    """``run_charged`` of many runs in one query: run id -> net charges (0 for a run never charged)."""
    charged = dict.fromkeys(run_ids, 0)
    for start in range(0, len(run_ids), 500):  # bound the IN list
        rows = session.execute(
            select(LedgerTransaction.run_id, func.coalesce(func.sum(LedgerPosting.amount_micros), 0))
            .join(LedgerTransaction, LedgerTransaction.id == LedgerPosting.transaction_id)
            .where(LedgerTransaction.run_id.in_(run_ids[start:start + 500]), LedgerPosting.account == REVENUE)
            .group_by(LedgerTransaction.run_id))
        charged.update({run_id: int(total or 0) for run_id, total in rows})
    return charged


def post(session: Session, *, user_id: str, kind: str, postings: list[tuple[str, int]], description: str = "",
         run_id: int | None = None, model_id: str | None = None, gpu_type: str | None = None,
         idempotency_key: str | None = None, lock: bool = True) -> LedgerTransaction | None:
    """Write one balanced transaction. ``postings`` are (account, micros); user accounts get ``user_id``.
    Returns ``None`` when ``idempotency_key`` was already written (the repeat changes nothing)."""
    if lock:
        lock_user(session, user_id)
    if idempotency_key is not None and session.scalar(
            select(LedgerTransaction.id).where(LedgerTransaction.idempotency_key == idempotency_key)) is not None:
        return None
    postings = [(account, amount) for account, amount in postings if amount]
    if sum(amount for _, amount in postings) != 0:
        raise ValueError(f"unbalanced ledger transaction {kind}: {postings}")
    if not postings:
        return None
    entry = LedgerTransaction(user_id=user_id, kind=kind, description=description[:300], run_id=run_id,
                              model_id=model_id, gpu_type=gpu_type, idempotency_key=idempotency_key)
    session.add(entry)
    session.flush()
    for account, amount in postings:
        owner = user_id if account in (AVAILABLE, HELD) else None
        session.add(LedgerPosting(transaction_id=entry.id, user_id=owner, account=account, amount_micros=amount))
    session.flush()
    return entry


def top_up(session: Session, *, user_id: str, micros: int, description: str = "Top-up",
           idempotency_key: str | None = None) -> LedgerTransaction | None:
    if micros <= 0:
        raise BadRequest("a top-up must be a positive amount")
    entry = post(session, user_id=user_id, kind="topup", postings=[(FUNDING, -micros), (AVAILABLE, micros)],
                 description=description, idempotency_key=idempotency_key)
    account = session.get(User, user_id)
    if entry is not None and account is not None and account.account_type == "team":  # a team's activity log
        teams_service.record(session, owner_id=user_id, actor_id=session.info.get(ACTOR_KEY), action="topped_up",
                             target=f"credit {format_cents(micros)}", detail={"description": description})
    return entry


def floor_dollars(micros: int) -> str:
    """``$1.23``, rounded down: what is available is never shown higher than it is."""
    cents = micros_to_cents(micros)
    return f"${cents // 100:,}.{cents % 100:02d}"


def transfer(session: Session, *, from_user_id: str, to_user_id: str, micros: int, description: str) -> None:
    """Move ``micros`` of available credit from one user to another, atomically (the caller's transaction): one
    debit in the payer's ledger, one credit in the payee's, both through ``transfers``. Both rows are locked in
    one order (two opposite moves cannot deadlock); the payer's available credit never goes below zero (402)."""
    if micros <= 0:
        raise BadRequest("the amount must be positive")
    if from_user_id == to_user_id:
        raise BadRequest("credit cannot move to the account it comes from")
    for user_id in sorted((from_user_id, to_user_id)):
        lock_user(session, user_id)
    available = balances(session, user_id=from_user_id).available
    if micros > available:
        raise PaymentRequired(f"only {floor_dollars(available)} of your credit is available",
                              extra={"availableCents": micros_to_fractional_cents(available)})
    post(session, user_id=from_user_id, kind="transfer", postings=[(AVAILABLE, -micros), (TRANSFERS, micros)],
         description=description, lock=False)
    post(session, user_id=to_user_id, kind="transfer", postings=[(TRANSFERS, -micros), (AVAILABLE, micros)],
         description=description, lock=False)


def fund_team(session: Session, actor: Principal, team_name: str, micros: int) -> User:
    """An admin of team ``team_name`` gives it ``micros`` of their own available credit (``transfer``), written
    to the team's activity log. Returns the team."""
    team, _ = teams_service.team_for(session, actor, team_name, "manage_billing")
    transfer(session, from_user_id=actor.user_id, to_user_id=team.id, micros=micros,
             description=f"Credit from {actor.username} to team {team.username}")
    teams_service.record(session, owner_id=team.id, actor_id=actor.user_id, action="funded",
                         target=f"credit {floor_dollars(micros)}", detail={"from": actor.username,
                                                                           "to": team.username})
    return team


def place_hold(session: Session, *, user_id: str, run_id: int, micros: int, estimate_micros: int,
               model_id: str | None = None, gpu_type: str | None = None) -> None:
    """Reserve credit for a run; 402 with the balance and the estimate when the available credit is short."""
    lock_user(session, user_id)
    current = balances(session, user_id=user_id)
    if micros > current.available:
        raise PaymentRequired(
            f"insufficient credits: this run is estimated at {format_cents(estimate_micros)} and holds "
            f"{format_cents(micros)}, but only {format_cents(current.available)} is available",
            extra={"balanceCents": micros_to_fractional_cents(current.available),
                   "estimatedCostCents": micros_to_fractional_cents(estimate_micros),
                   "holdCents": micros_to_fractional_cents(micros)})
    post(session, user_id=user_id, kind="hold", postings=[(AVAILABLE, -micros), (HELD, micros)], lock=False,
         description="Hold for training run", run_id=run_id, model_id=model_id, gpu_type=gpu_type,
         idempotency_key=f"hold:{run_id}")


def charge_run_to(session: Session, *, user_id: str, run_id: int, target_micros: int, model_id: str | None = None,
                  gpu_type: str | None = None, description: str = "Training") -> int:
    """Bring a run's net charge up to ``target_micros`` (cumulative, so a repeated call is a no-op).
    Draws on the run's hold first, then on available credit, never below zero. Returns the shortfall
    (0 when fully charged): a positive value means the user ran out of credit."""
    lock_user(session, user_id)
    charged = run_charged(session, run_id)
    due = target_micros - charged
    if due <= 0:
        return 0
    from_hold = min(due, max(0, run_held(session, run_id)))
    from_available = min(due - from_hold, max(0, balances(session, user_id=user_id).available))
    amount = from_hold + from_available
    if amount:
        post(session, user_id=user_id, kind="charge", lock=False, run_id=run_id, model_id=model_id,
             gpu_type=gpu_type, description=description,
             idempotency_key=f"charge:{run_id}:{charged}-{charged + amount}",
             postings=[(HELD, -from_hold), (AVAILABLE, -from_available), (REVENUE, amount)])
    return due - amount


def charge_usage_to(session: Session, *, user_id: str, reference: str, charged_micros: int, target_micros: int,
                    kind: str, description: str, model_id: str | None = None) -> tuple[int, int]:
    """Bring a metered service's net charge from ``charged_micros`` (what its owner row says the ledger holds)
    up to ``target_micros``, from available credit, never below zero; no hold (an endpoint runs until stopped).
    Returns (charged now, shortfall); a positive shortfall means the credit ran out. The idempotency key names
    the interval, so a retried pass charges nothing twice."""
    lock_user(session, user_id)
    due = target_micros - charged_micros
    if due <= 0:
        return 0, 0
    amount = min(due, max(0, balances(session, user_id=user_id).available))
    if amount:
        post(session, user_id=user_id, kind=kind, lock=False, model_id=model_id, description=description,
             idempotency_key=f"{reference}:{charged_micros}-{charged_micros + amount}",
             postings=[(AVAILABLE, -amount), (REVENUE, amount)])
    return amount, due - amount


def refund_run_to(session: Session, *, user_id: str, run_id: int, target_micros: int, reason: str,
                  model_id: str | None = None, gpu_type: str | None = None) -> int:
    """Bring a run's net charge down to ``target_micros`` (time charged that the run did not get)."""
    lock_user(session, user_id)
    charged = run_charged(session, run_id)
    excess = charged - max(0, target_micros)
    if excess <= 0:
        return 0
    post(session, user_id=user_id, kind="refund", lock=False, run_id=run_id, model_id=model_id, gpu_type=gpu_type,
         description=reason, idempotency_key=f"refund:{run_id}:{charged}-{charged - excess}",
         postings=[(REVENUE, -excess), (AVAILABLE, excess)])
    return excess


def release_hold(session: Session, *, user_id: str, run_id: int, model_id: str | None = None,
                 gpu_type: str | None = None) -> int:
    """Return what is left of a run's hold to available credit (once, at settlement)."""
    lock_user(session, user_id)
    remaining = run_held(session, run_id)
    if remaining <= 0:
        return 0
    post(session, user_id=user_id, kind="release", lock=False, run_id=run_id, model_id=model_id, gpu_type=gpu_type,
         description="Unused hold returned", idempotency_key=f"release:{run_id}",
         postings=[(HELD, -remaining), (AVAILABLE, remaining)])
    return remaining


def transactions(session: Session, *, user_id: str, since: object = None, until: object = None,
                 limit: int = 1000, offset: int = 0) -> list[tuple[LedgerTransaction, int, int]]:
    """Newest first: (transaction, change of the user's balance, change of its available credit), skipping the
    ``offset`` newest."""
    stmt = select(LedgerTransaction).where(LedgerTransaction.user_id == user_id)
    if since is not None:
        stmt = stmt.where(LedgerTransaction.created_at >= since)
    if until is not None:
        stmt = stmt.where(LedgerTransaction.created_at <= until)
    rows = list(session.scalars(stmt.order_by(*NEWEST_FIRST).offset(offset).limit(limit)))
    if not rows:
        return []
    effects: dict[str, dict[str, int]] = {}
    for tx_id, account, amount in session.execute(
            select(LedgerPosting.transaction_id, LedgerPosting.account, LedgerPosting.amount_micros)
            .where(LedgerPosting.transaction_id.in_([r.id for r in rows]), LedgerPosting.user_id == user_id)):
        effects.setdefault(tx_id, {}).setdefault(account, 0)
        effects[tx_id][account] += amount
    result = []
    for row in rows:
        effect = effects.get(row.id, {})
        result.append((row, effect.get(AVAILABLE, 0) + effect.get(HELD, 0), effect.get(AVAILABLE, 0)))
    return result
