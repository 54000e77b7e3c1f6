"""Team endpoints: create a team, its members and roles, invitations, leaving, the activity log. HTTP only: the
rules are ``service`` and ``permissions``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.accounts.models import User
from lanner.billing import service as billing
from lanner.db import iso, utcnow
from lanner.http.deps import DbSession
from lanner.teams import queries, service
from lanner.teams.schemas import (
    InvitationAccept,
    InvitationCreate,
    MemberAdd,
    MemberUpdate,
    TeamCreate,
    TeamFunding,
)
from lanner.training import budgets  # routers are the HTTP edge: per-member spend is the training domain's

router = APIRouter(tags=["teams"])
CENT = 10_000  # micros per cent


@router.post("/api/teams", status_code=201, summary="Create a team: a shared workspace you own")
def create_team(body: TeamCreate, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    owner = session.get(User, principal.user_id)
    assert owner is not None
    team = service.create_team(session, name=body.name, owner=owner, full_name=body.fullName)
    return {"team": {"userId": team.id, "username": team.username, "fullName": team.full_name, "plan": team.tier,
                     "role": "owner"}}


@router.delete("/api/teams/{team}", summary="Delete an empty team (owners): no datasets, projects, endpoints or "
               "credit left; its members, invitations, activity and ledger history go with it")
def delete_team(team: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    account, _ = service.team_for(session, principal, team, "delete_team")
    balance = billing.balances(session, user_id=account.id)
    service.delete_team(session, principal, team, balance_micros=balance.total)
    return {"success": True}


@router.get("/api/teams/{team}/members", summary="The team's members and their roles (any member)")
def list_members(team: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return {"members": [_member(m) for m in service.members(session, principal, team)]}


@router.post("/api/teams/{team}/members", status_code=201, summary="Add an existing user (admins)")
def add_member(team: str, body: MemberAdd, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    member = service.add_member(session, principal, team, body.username, body.role)
    return {"username": body.username.lower(), "role": member.role}


@router.patch("/api/teams/{team}/members/{username}", summary="Change a member's role or monthly budget (admins)")
def update_member(team: str, username: str, body: MemberUpdate, principal: CurrentPrincipal,
                  session: DbSession) -> dict[str, Any]:
    service.team_for(session, principal, team, "manage_members")  # even a PATCH that changes nothing is an admin's
    if body.role is not None:
        service.set_role(session, principal, team, username, body.role)
    if body.monthlyBudgetCents is not None or body.clearBudget:
        micros = None if body.clearBudget else body.monthlyBudgetCents * CENT  # type: ignore[operator]
        service.set_budget(session, principal, team, username, micros)
    return _member(service.member(session, principal, team, username))


@router.delete("/api/teams/{team}/members/{username}",
               summary="Remove a member (admins), or leave (yourself): their access ends at once")
def remove_member(team: str, username: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    service.remove_member(session, principal, team, username)
    return {"success": True}


@router.post("/api/teams/{team}/invitations", status_code=201,
             summary="A single-use invitation link with a role, expiring in 1-30 days (admins)")
def create_invitation(team: str, body: InvitationCreate, principal: CurrentPrincipal,
                      session: DbSession) -> dict[str, Any]:
    invitation, token = service.invite(session, principal, team, body.role, body.days)
    return {"id": invitation.id, "token": token, "role": invitation.role, "expiresAt": iso(invitation.expires_at)}


@router.post("/api/invitations/accept", summary="Join the team an invitation names, with its role")
def accept_invitation(body: InvitationAccept, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    team, member = service.accept(session, principal, body.token)
    return {"team": team.username, "role": member.role}


@router.get("/api/teams/{team}/activity", summary="Who did what in the team, newest first (admins)",
            description="Pages of `limit` events; `nextCursor` asks for the older ones (null at the end). The cursor "
            "is the last event's time and id, so events written in the same instant are never skipped or repeated.")
def activity(team: str, principal: CurrentPrincipal, session: DbSession,
             limit: Annotated[int, Query(ge=1, le=queries.ACTIVITY_PAGE_MAX)] = 100,
             cursor: Annotated[str | None, Query(max_length=80)] = None) -> dict[str, Any]:
    events, next_cursor = queries.activity_page(session, principal, team, limit=limit, cursor=cursor)
    return {"events": [{**e, "at": iso(e["at"])} for e in events], "nextCursor": next_cursor}


@router.get("/api/teams/{team}/invitations", summary="The team's pending invitations (admins); their links are "
            "shown once, when made")
def invitations(team: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return {"invitations": queries.pending_invitations(session, principal, team)}


@router.delete("/api/teams/{team}/invitations/{invitation_id}", summary="Revoke a pending invitation (admins)")
def revoke_invitation(team: str, invitation_id: Annotated[str, Path(max_length=32)], principal: CurrentPrincipal,
                      session: DbSession) -> dict[str, Any]:
    queries.revoke_invitation(session, principal, team, invitation_id)
    return {"success": True}


@router.get("/api/teams/{team}/spend", summary="What each member's runs took from the team's credit this month, "
            "against their budget (admins)")
def spend(team: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    account, _ = service.team_for(session, principal, team, "manage_billing")
    ids = queries.member_ids(session, principal, team)  # one query, as the team page reads them
    rows = []
    for row in service.members(session, principal, team):
        spent = budgets.month_spend(session, owner_id=account.id, user_id=ids[row["username"]])
        budget = row["monthlyBudgetMicros"]
        rows.append({"username": row["username"], "role": row["role"],
                     "spentCents": billing.micros_to_fractional_cents(spent),
                     "budgetCents": None if budget is None else billing.micros_to_fractional_cents(budget)})
    balance = billing.balances(session, user_id=account.id)
    return {"team": account.username, "month": utcnow().strftime("%Y-%m"), "members": rows,
            "availableCents": billing.micros_to_fractional_cents(balance.available),
            "heldCents": billing.micros_to_fractional_cents(balance.held)}


@router.post("/api/teams/{team}/credit", summary="Give the team credit from your own (admins): one debit on you, "
             "one credit on the team, never below zero (402)")
def fund(team: str, body: TeamFunding, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    account = billing.fund_team(session, principal, team, body.amountCents * CENT)
    theirs, yours = (billing.balances(session, user_id=i) for i in (account.id, principal.user_id))
    return {"team": account.username, "amountCents": body.amountCents,
            "availableCents": billing.micros_to_fractional_cents(theirs.available),
            "yourAvailableCents": billing.micros_to_fractional_cents(yours.available)}


def _member(row: dict[str, Any]) -> dict[str, Any]:
    micros = row.pop("monthlyBudgetMicros")
    return {**row, "monthlyBudgetCents": None if micros is None else micros // CENT}
