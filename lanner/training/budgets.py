"""A team member's monthly budget: what the runs they start in a team may take from the team's credit in one
calendar month (UTC), set by an admin (``teams.service.set_budget``). Checked when a run's credit is held, under
the lock of the team's ledger account, so concurrent starts by one member see each other's holds."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.billing import service as billing
from lanner.billing.models import HELD, REVENUE, LedgerPosting, LedgerTransaction
from lanner.db import utcnow
from lanner.errors import PaymentRequired
from lanner.projects.models import ModelRecord
from lanner.teams.models import TeamMember
from lanner.training.models import Run


def month_spend(session: Session, *, owner_id: str, user_id: str) -> int:
    """Micros the member's runs in workspace ``owner_id`` started this month were charged (net) or still hold."""
    month = utcnow().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    runs = (select(Run.id).join(ModelRecord, ModelRecord.id == Run.model_id)
            .where(ModelRecord.owner_id == owner_id, Run.started_by_id == user_id, Run.created_at >= month))
    total = session.scalar(select(func.coalesce(func.sum(LedgerPosting.amount_micros), 0))
                           .join(LedgerTransaction, LedgerTransaction.id == LedgerPosting.transaction_id)
                           .where(LedgerTransaction.run_id.in_(runs), LedgerPosting.account.in_((HELD, REVENUE))))
    return int(total or 0)


def check(session: Session, *, owner_id: str, user_id: str, hold_micros: int) -> None:
    """402 (``budget_exceeded``) when this hold would take the member past their monthly budget in the team.
    Takes the team's ledger lock first (``place_hold`` takes it again in the same transaction)."""
    budget = session.scalar(select(TeamMember.monthly_budget_micros).where(TeamMember.team_id == owner_id,
                                                                           TeamMember.user_id == user_id))
    if budget is None or hold_micros <= 0:
        return
    billing.lock_user(session, owner_id)
    spent = month_spend(session, owner_id=owner_id, user_id=user_id)
    if spent + hold_micros > budget:
        raise PaymentRequired(
            f"monthly budget: your runs in this team may take {billing.format_cents(budget)} of its credit this "
            f"month; {billing.format_cents(spent)} is spent or held, and this run holds "
            f"{billing.format_cents(hold_micros)}", code="budget_exceeded",
            extra={"budgetCents": billing.micros_to_fractional_cents(budget),
                   "spentCents": billing.micros_to_fractional_cents(spent),
                   "holdCents": billing.micros_to_fractional_cents(hold_micros)})
