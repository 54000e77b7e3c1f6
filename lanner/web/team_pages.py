"""Teams in the web app: the teams you belong to (and creating one), a team's page (members, roles, monthly
budgets and this month's spend; for admins the controls to manage them, invitation links and pending
invitations; leaving), and the team's activity log (admins, as the API: an outsider gets the 404 of a team that
does not exist, a member below admin 403).

Every rule is ``teams.service`` / ``teams.queries`` (the same calls as ``/api/teams``), called with the visitor as
the acting person; the page only decides which controls to show. Forms post normally (303 back to the page with
a message) and, with htmx, the same routes answer with the ``_team.html`` fragment the page includes. What the
path names and does not exist (a team the visitor is not in, a member, an invitation) is a 404 page, like the
API; what a form got wrong is the form again with the error next to the field (422)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.billing import service as billing_service
from lanner.errors import BadRequest, Conflict, NotFound, PaymentRequired
from lanner.http.deps import Ctx, DbSession
from lanner.teams import queries, service
from lanner.teams.permissions import ROLES, allows
from lanner.training import budgets
from lanner.web.templating import PageUser, is_fragment_request, redirect, render

router = APIRouter(include_in_schema=False)
NAME_MAX = 40
FULL_NAME_MAX = 200
INVITATION_DAYS = (1, 7, 14, 30)
BUDGET_MAX_DOLLARS = Decimal(1_000_000)
MICROS_PER_DOLLAR = 1_000_000
ACTIVITY_PER_PAGE = 50
ROLE_HINTS = {"viewer": "reads everything in the team",
              "editor": "also creates and changes datasets, projects and models, and starts runs",
              "admin": "also manages members, roles, budgets and invitations, and reads the activity log",
              "owner": "also deletes or transfers the team"}


# --- the list of your teams, creating one --------------------------------------------------------------------------

def _teams_page(request: Request, session: Session, user: Principal, *, status_code: int = 200,
                errors: dict[str, str] | None = None, form: dict[str, str] | None = None) -> HTMLResponse:
    return render(request, "teams.html", {
        "teams": service.teams_of(session, user.user_id), "errors": errors or {},
        "form": form or {"name": "", "full_name": ""}, "section": "teams",
    }, status_code=status_code, user=user, active="account")


@router.get("/teams", response_class=HTMLResponse)
def teams_page(request: Request, user: PageUser, session: DbSession) -> Response:
    return _teams_page(request, session, user)


@router.post("/teams", response_class=HTMLResponse)
def create_team(request: Request, user: PageUser, session: DbSession, name: Annotated[str, Form()] = "",
                full_name: Annotated[str, Form()] = "") -> Response:
    """A team you own (``POST /api/teams``), then its page."""
    name, full_name = name.strip(), full_name.strip()
    error = "Give the team a name." if not name else (
        f"Use at most {NAME_MAX} characters." if len(name) > NAME_MAX else None)
    if not error and len(full_name) > FULL_NAME_MAX:
        return _teams_page(request, session, user, status_code=422, form={"name": name, "full_name": full_name},
                           errors={"full_name": f"Use at most {FULL_NAME_MAX} characters."})
    if not error:
        owner = accounts_service.require_user(session, username=user.username)
        try:
            team = service.create_team(session, name=name, owner=owner, full_name=full_name)
        except Conflict:
            error = f"“{_slug(name)}” is taken: teams and people share one set of addresses."
        except BadRequest:
            error = "Use at least one letter or digit: the name gives the team its address."
        else:
            return redirect(request, f"/teams/{team.username}", f"Team “{team.username}” created: you are its owner.")
    return _teams_page(request, session, user, status_code=422, errors={"name": error},
                       form={"name": name, "full_name": full_name})


def _slug(name: str) -> str:
    try:
        return service.team_slug(name)
    except BadRequest:
        return name.lower()


# --- one team ------------------------------------------------------------------------------------------------------

def _team(session: Session, user: Principal, team_name: str) -> dict[str, Any]:
    """Everything the team page shows the visitor: members (budgets, and spend this month: an admin sees every
    member's, anyone else their own), and for admins the team's credit and its pending invitations."""
    team, role = service.team_for(session, user, team_name, "read")
    admin = allows(role, "manage_members")
    ids = queries.member_ids(session, user, team.username)
    members = []
    for member in service.members(session, user, team.username):
        mine = member["username"] == user.username
        spent = (budgets.month_spend(session, owner_id=team.id, user_id=ids[member["username"]])
                 if admin or mine else None)
        members.append({**member, "spent": spent, "mine": mine,
                        "manageable": admin and (role == "owner" or member["role"] != "owner")})
    return {
        "team": team, "role": role, "admin": admin, "owner": role == "owner", "members": members,
        "grantable": [r for r in ROLES if r != "owner" or role == "owner"], "role_hints": ROLE_HINTS,
        "invitations": queries.pending_invitations(session, user, team.username) if admin else [],
        "credit": billing_service.balances(session, user_id=team.id) if admin else None,
        "your_credit": billing_service.balances(session, user_id=user.user_id) if admin else None,
        "days": INVITATION_DAYS,
    }


def _page(request: Request, session: Session, user: Principal, team_name: str, *, status_code: int = 200,
          **context: Any) -> HTMLResponse:
    values = {**_team(session, user, team_name), "errors": {}, "notice": None, "new_invitation": None,
              "add": {"username": "", "role": "viewer"}, "fund": {"amount": ""}, **context}
    response = render(request, "team.html", values, fragment="_team.html", status_code=status_code, user=user,
                      active="account")
    if values["new_invitation"]:
        response.headers["Referrer-Policy"] = "no-referrer"
    return response


def _done(request: Request, session: Session, user: Principal, team_name: str, message: str,
          kind: str = "success") -> Response:
    """After a change, or a change the rules refused: the fragment with the message (htmx), else back to the
    page, which shows it once."""
    if is_fragment_request(request):
        return _page(request, session, user, team_name, notice={"kind": kind, "message": message})
    return redirect(request, f"/teams/{team_name}", message, kind)


@router.get("/teams/{team}", response_class=HTMLResponse)
def team_page(team: str, request: Request, user: PageUser, session: DbSession) -> Response:
    return _page(request, session, user, team)


def _budget_micros(text: str) -> int | None:
    """Dollars as typed (``50``, ``12.50``) -> micros; empty -> None (no limit). ValueError says what is wrong."""
    text = text.strip().lstrip("$").replace(",", "")
    if not text:
        return None
    try:
        dollars = Decimal(text)
    except InvalidOperation:
        raise ValueError("Enter an amount in dollars, such as 50 or 12.50, or leave it empty for no limit.") from None
    if not dollars.is_finite() or dollars < 0 or dollars > BUDGET_MAX_DOLLARS or dollars != round(dollars, 2):
        raise ValueError(f"Enter 0 to {BUDGET_MAX_DOLLARS:,} dollars, in whole cents.")
    return int(dollars * MICROS_PER_DOLLAR)


@router.post("/teams/{team}/credit", response_class=HTMLResponse)
def fund_team(team: str, request: Request, user: PageUser, session: DbSession,
              amount: Annotated[str, Form(max_length=30)] = "") -> Response:
    """An admin gives the team credit from their own (``POST /api/teams/{team}/credit``)."""
    found, _ = service.team_for(session, user, team, "manage_billing")
    try:
        micros = _budget_micros(amount) or 0
    except ValueError:
        micros = 0
    try:
        if micros <= 0:
            raise ValueError("Enter an amount in dollars, such as 25 or 12.50.")
        billing_service.fund_team(session, user, found.username, micros)
    except ValueError as exc:
        error = str(exc)
    except PaymentRequired as exc:
        error = f"That is more than you have: {exc.message}."
    else:
        return _done(request, session, user, found.username,
                     f"Added {billing_service.floor_dollars(micros)} of your credit to {found.username}.")
    return _page(request, session, user, found.username, status_code=422, errors={"amount": error},
                 fund={"amount": amount})


@router.post("/teams/{team}/members", response_class=HTMLResponse)
def add_member(team: str, request: Request, user: PageUser, session: DbSession,
               username: Annotated[str, Form(max_length=200)] = "",
               role: Annotated[str, Form(max_length=20)] = "viewer") -> Response:
    """An existing user joins with ``role`` (admins; only an owner adds an owner)."""
    found, _ = service.team_for(session, user, team, "manage_members")
    username = username.strip().lstrip("@")
    error = "Enter the username of the person to add." if not username else None
    if not error:
        try:
            service.add_member(session, user, found.username, username, role)
        except (NotFound, Conflict, BadRequest) as exc:
            error = exc.message
        else:
            return _done(request, session, user, found.username, f"Added {username.lower()} as {role}.")
    return _page(request, session, user, found.username, status_code=422, errors={"username": error},
                 add={"username": username, "role": role})


@router.post("/teams/{team}/members/{username}", response_class=HTMLResponse)
def update_member(team: str, username: str, request: Request, user: PageUser, session: DbSession,
                  role: Annotated[str, Form(max_length=20)] = "",
                  budget: Annotated[str, Form(max_length=40)] = "") -> Response:
    """A member's role and monthly budget (empty: no limit), each changed only if it differs (admins)."""
    found, _ = service.team_for(session, user, team, "manage_members")
    current = service.member(session, user, found.username, username)
    try:
        micros = _budget_micros(budget)
    except ValueError as exc:
        return _page(request, session, user, found.username, status_code=422,
                     errors={f"budget-{current['username']}": str(exc)})
    changed = []
    try:
        if role and role != current["role"]:
            service.set_role(session, user, found.username, current["username"], role)
            changed.append(f"role {role}")
        if micros != current["monthlyBudgetMicros"]:
            service.set_budget(session, user, found.username, current["username"], micros)
            changed.append("no budget" if micros is None else f"a budget of ${micros / MICROS_PER_DOLLAR:,.2f} a month")
    except (Conflict, BadRequest) as exc:  # the last owner's role: before any change
        return _done(request, session, user, found.username, exc.message, "error")
    message = (f"{current['username']} now has {' and '.join(changed)}." if changed
               else f"Nothing changed for {current['username']}.")
    return _done(request, session, user, found.username, message, "success" if changed else "info")


def _leave(request: Request, session: Session, user: Principal, team_name: str) -> Response:
    try:
        service.remove_member(session, user, team_name, user.username)
    except Conflict as exc:
        return _done(request, session, user, team_name, exc.message, "error")
    return redirect(request, "/teams", f"You left team “{team_name}”.")


@router.post("/teams/{team}/members/{username}/remove", response_class=HTMLResponse)
def remove_member(team: str, username: str, request: Request, user: PageUser, session: DbSession) -> Response:
    """Their access ends at once, API keys included (admins; only an owner removes an owner). Yourself: leaving."""
    found, _ = service.team_for(session, user, team, "read")
    if username.lower() == user.username:
        return _leave(request, session, user, found.username)
    current = service.member(session, user, found.username, username)
    try:
        service.remove_member(session, user, found.username, current["username"])
    except Conflict as exc:
        return _done(request, session, user, found.username, exc.message, "error")
    return _done(request, session, user, found.username,
                 f"Removed {current['username']} from {found.username}: their access has ended.")


@router.post("/teams/{team}/leave", response_class=HTMLResponse)
def leave_team(team: str, request: Request, user: PageUser, session: DbSession) -> Response:
    """Any member leaves (the last owner cannot: another owner first); on to your teams."""
    found, _ = service.team_for(session, user, team, "read")
    return _leave(request, session, user, found.username)


@router.post("/teams/{team}/invitations", response_class=HTMLResponse)
def create_invitation(team: str, request: Request, user: PageUser, session: DbSession, ctx: Ctx,
                      role: Annotated[str, Form(max_length=20)] = "viewer",
                      days: Annotated[str, Form(max_length=10)] = "7") -> Response:
    """A single-use link, shown in this answer only (only its digest is kept): the page, not a redirect, so the
    link is in no URL, cookie or history entry of the admin's browser."""
    found, _ = service.team_for(session, user, team, "manage_members")
    lasting = int(days) if days.strip().isdigit() and len(days.strip()) <= 2 else 0
    if lasting not in range(1, service.MAX_INVITATION_DAYS + 1):
        return _page(request, session, user, found.username, status_code=422,
                     errors={"days": f"An invitation lasts 1 to {service.MAX_INVITATION_DAYS} days."})
    try:
        invitation, token = service.invite(session, user, found.username, role, lasting)
    except BadRequest as exc:
        return _page(request, session, user, found.username, status_code=422, errors={"role": exc.message})
    link = f"{ctx.settings.public_url.rstrip('/')}/invitations/{token}"
    return _page(request, session, user, found.username, status_code=201,
                 new_invitation={"link": link, "role": invitation.role, "expires_at": invitation.expires_at})


@router.post("/teams/{team}/invitations/{invitation_id}/revoke", response_class=HTMLResponse)
def revoke_invitation(team: str, invitation_id: str, request: Request, user: PageUser,
                      session: DbSession) -> Response:
    queries.revoke_invitation(session, user, team, invitation_id)
    found, _ = service.team_for(session, user, team, "read")
    return _done(request, session, user, found.username, "Invitation revoked: its link no longer works.")


# --- the activity log ----------------------------------------------------------------------------------------------

ACTION_LABELS = {"created": "created", "member_added": "added", "member_removed": "removed", "member_left": "left",
                 "member_joined": "joined through an invitation", "role_changed": "changed the role of",
                 "budget_set": "set the monthly budget of", "invited": "created an invitation for",
                 "invitation_revoked": "revoked an invitation for", "funded": "gave the team",
                 "topped_up": "topped up the team's"}


def _detail(event: dict[str, Any]) -> str:
    """An event's detail as words: ``viewer → editor``, ``$50.00 a month``, ``role editor``."""
    detail = event["detail"] or {}
    if "from" in detail and "to" in detail:
        return f"{detail['from']} → {detail['to']}"
    if "monthlyBudgetMicros" in detail:
        micros = detail["monthlyBudgetMicros"]
        return "no limit" if micros is None else f"${micros / MICROS_PER_DOLLAR:,.2f} a month"
    return ", ".join(f"{key} {value}" for key, value in detail.items() if key != "expiresAt")


@router.get("/teams/{team}/activity", response_class=HTMLResponse)
def activity_page(team: str, request: Request, user: PageUser, session: DbSession,
                  cursor: str | None = Query(None, max_length=80)) -> Response:
    """Newest first, ``ACTIVITY_PER_PAGE`` at a time; "Older" carries the cursor of the next page."""
    events, older = queries.activity_page(session, user, team, limit=ACTIVITY_PER_PAGE, cursor=cursor)
    found, role = service.team_for(session, user, team, "read")
    rows = [{**e, "label": ACTION_LABELS.get(e["action"], e["action"].replace("_", " ")), "words": _detail(e)}
            for e in events]
    return render(request, "team_activity.html", {"team": found, "role": role, "events": rows, "older": older,
                                                  "paged": bool(cursor)}, user=user, active="account")
