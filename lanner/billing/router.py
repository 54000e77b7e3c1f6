"""``billing.transactions`` and ``billing.usage_summary`` of the SDK, read from the ledger."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Query

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.accounts.models import User
from lanner.billing import service
from lanner.billing.models import LedgerTransaction
from lanner.db import iso
from lanner.errors import BadRequest
from lanner.http.deps import DbSession
from lanner.projects import service as projects_service
from lanner.teams import permissions

router = APIRouter(tags=["billing"])

# The ledger's kinds as the SDK names transaction types (hold, charge and release are all "training"; a
# dedicated endpoint's time is "deployment");
# the ledger kind itself goes along as ``kind`` (Lanner extension).
WIRE_TYPES = {"topup": "adjustment", "hold": "training", "charge": "training", "release": "training",
              "refund": "refund", "endpoint": "deployment", "autolabel": "annotation"}


def _parse_time(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"{name}: not an ISO 8601 timestamp: {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _model_refs(session: Any, rows: list[LedgerTransaction], user_id: str) -> dict[str, dict[str, Any]]:
    refs = projects_service.model_refs(session, {r.model_id for r in rows if r.model_id}, owner_id=user_id)
    return {model_id: {"name": ref.name, "slug": ref.slug, "projectSlug": ref.project_slug, "username": ref.owner}
            for model_id, ref in refs.items()}


OWNER = Query(default=None, max_length=100, description="Lanner: a team's ledger instead of yours (transactions: "
              "its admins; usage summary: any member)")


def _account(session: Any, principal: Any, owner: str | None, action: str) -> str:
    """The ledger account asked for: the caller's own, or a team's they may ``action`` in (404 otherwise)."""
    return permissions.workspace_for(session, user_id=principal.user_id, username=principal.username, owner=owner,
                                     action=action)[0]


@router.get("/api/billing/transactions")
def transactions(principal: CurrentPrincipal, session: DbSession,
                 from_: str | None = Query(default=None, alias="from"), to: str | None = None,
                 owner: str | None = OWNER) -> dict[str, Any]:
    since, until = _parse_time(from_, "from"), _parse_time(to, "to")
    account = _account(session, principal, owner, "manage_billing")
    rows = service.transactions(session, user_id=account, limit=100_000)
    running = service.balance_micros(session, user_id=account)
    models = _model_refs(session, [r for r, _, _ in rows], account)
    items = []
    for row, effect, available_effect in rows:  # newest first: the balance after a row is the one before the next
        after = running
        running -= effect
        created = row.created_at
        if (since is not None and created < since) or (until is not None and created > until):
            continue
        item: dict[str, Any] = {
            "id": row.id, "type": WIRE_TYPES.get(row.kind, "adjustment"), "kind": row.kind,
            "amountCents": service.micros_to_fractional_cents(effect),
            "availableCents": service.micros_to_fractional_cents(available_effect),
            "balanceAfter": service.micros_to_fractional_cents(after),
            "description": row.description, "createdAt": iso(created),
        }
        if row.run_id is not None:
            item["runId"] = str(row.run_id)
        if row.model_id:
            item["modelId"] = row.model_id
            if row.model_id in models:
                item["model"] = {**models[row.model_id], **({"gpuType": row.gpu_type} if row.gpu_type else {})}
        if row.gpu_type:
            item["gpuType"] = row.gpu_type
        items.append(item)
    return {"transactions": items}


@router.get("/api/billing/usage-summary")
def usage_summary(principal: CurrentPrincipal, session: DbSession, owner: str | None = OWNER) -> dict[str, Any]:
    user = session.get(User, _account(session, principal, owner, "read"))
    assert user is not None
    balance = service.balances(session, user_id=user.id)
    return {
        "plan": {"planId": user.tier, "name": user.tier.capitalize(), "status": "active", "cancelAtPeriodEnd": False},
        "metrics": [],
        "trainingCredit": {"monthlyGrant": 0.0,
                           "balanceAvailable": service.micros_to_fractional_cents(balance.available)},
        "features": {"privateProjects": True, "teams": True, "enterpriseLicense": user.tier == "enterprise"},
        "creditsCents": service.micros_to_fractional_cents(balance.total),
        # Lanner extension: credit reserved for queued and running jobs.
        "heldCents": service.micros_to_fractional_cents(balance.held),
    }
