"""An invitation link, opened: ``/invitations/{token}`` shows the signed-in visitor the team and the role it
offers and an Accept button (``POST /invitations/accept``, as ``POST /api/invitations/accept``). A signed-out
visitor sees the offer with a sign-in form that comes back to the link, and, for a person without an account:
where the operator allows sign-ups (``LANNER_SIGNUPS``), ``/invitations/{token}/signup`` creates the account,
signs it in and joins the team in one transaction; elsewhere the page says to ask the operator for an account.

The token is the credential: whoever holds it sees the team's name, as an admin meant by sharing it. An unknown,
used, revoked or expired token is one page (404), the same for all, so a link tells nothing once it is spent."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, Response

from lanner.accounts import service as accounts_service
from lanner.accounts.dependencies import OptionalPrincipal
from lanner.accounts.principal import Principal
from lanner.accounts.sessions import set_session_cookie, start_session
from lanner.errors import BadRequest, Conflict, NotFound
from lanner.http.deps import Ctx, DbSession
from lanner.teams import queries, service
from lanner.web.templating import PageUser, redirect, render

router = APIRouter(include_in_schema=False)
TOKEN_MAX = 100


def _spent(request: Request, user: Principal | None) -> HTMLResponse:
    return _no_referrer(render(request, "invitation.html", {"offer": None}, status_code=404, user=user))


def _no_referrer(response: HTMLResponse) -> HTMLResponse:
    """The page's address holds the token: no link on it may send it on as a Referer."""
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@router.get("/invitations/{token}", response_class=HTMLResponse)
def invitation_page(request: Request, user: OptionalPrincipal, session: DbSession, ctx: Ctx,
                    token: Annotated[str, Path(max_length=TOKEN_MAX)]) -> Response:
    offer = queries.invitation_offer(session, token)
    if offer is None:
        return _spent(request, user)
    if user is None:  # sign in and come back, or (sign-ups allowed) create an account
        return _no_referrer(render(request, "invitation.html", {
            "offer": offer, "token": token, "member": None, "signups": ctx.settings.signups,
            "next": request.url.path}))
    member = next((t for t in service.teams_of(session, user.user_id) if t["username"] == offer.team), None)
    return _no_referrer(render(request, "invitation.html", {"offer": offer, "token": token, "member": member},
                               user=user, active="account"))


@router.post("/invitations/accept", response_class=HTMLResponse)
def accept_invitation(request: Request, user: PageUser, session: DbSession,
                      token: Annotated[str, Form(max_length=TOKEN_MAX)] = "") -> Response:
    """Join, then the team's page; a spent link: the same page as opening it."""
    try:
        team, member = service.accept(session, user, token)
    except NotFound:
        return _spent(request, user)
    except Conflict as exc:
        offer = queries.invitation_offer(session, token)
        return redirect(request, f"/teams/{offer.team}" if offer else "/teams", exc.message, "info")
    return redirect(request, f"/teams/{team.username}", f"You joined team “{team.username}” as {member.role}.")


# --- a person without an account (LANNER_SIGNUPS) ------------------------------------------------------------------

def _signup_page(request: Request, ctx: Ctx, offer: queries.InvitationOffer, token: str, *, status_code: int = 200,
                 username: str = "", errors: dict[str, str] | None = None) -> HTMLResponse:
    return _no_referrer(render(request, "invitation_signup.html", {
        "offer": offer, "token": token, "signups": ctx.settings.signups, "username": username,
        "errors": errors or {}}, status_code=status_code if ctx.settings.signups else 403))


@router.get("/invitations/{token}/signup", response_class=HTMLResponse)
def signup_page(request: Request, user: OptionalPrincipal, session: DbSession, ctx: Ctx,
                token: Annotated[str, Path(max_length=TOKEN_MAX)]) -> Response:
    offer = queries.invitation_offer(session, token)
    if offer is None:
        return _spent(request, user)
    if user is not None:
        return redirect(request, f"/invitations/{token}")
    return _signup_page(request, ctx, offer, token)


@router.post("/invitations/{token}/signup", response_class=HTMLResponse)
def signup(request: Request, user: OptionalPrincipal, session: DbSession, ctx: Ctx,
           token: Annotated[str, Path(max_length=TOKEN_MAX)], username: Annotated[str, Form(max_length=64)] = "",
           password: Annotated[str, Form(max_length=1000)] = "") -> Response:
    """A new account (only where sign-ups are allowed: else 403, nothing made), signed in, joined to the team."""
    offer = queries.invitation_offer(session, token)
    if offer is None:
        return _spent(request, user)
    if user is not None or not ctx.settings.signups:
        return _signup_page(request, ctx, offer, token) if user is None else redirect(request, f"/invitations/{token}")
    username = username.strip().lower()
    errors = {}
    if not username:
        errors["username"] = "Choose a username."
    try:
        accounts_service.check_new_password(password)
    except BadRequest:
        errors["password"] = "Use at least 8 characters."
    if not errors:
        try:
            account = accounts_service.create_user(session, username=username, password=password)
        except Conflict:
            errors["username"] = f"“{username}” is taken: choose another."
        except BadRequest:
            errors["username"] = "Use 1-40 lowercase letters, digits or inner hyphens (it is your address)."
    if errors:
        return _signup_page(request, ctx, offer, token, status_code=422, username=username, errors=errors)
    principal = Principal.of(account)
    try:
        team, member = service.accept(session, principal, token)
    except NotFound:  # used by someone else a moment ago: no account either
        session.rollback()
        return _spent(request, None)
    response = redirect(request, f"/teams/{team.username}",
                        f"Welcome, {account.username}: you joined team “{team.username}” as {member.role}.")
    set_session_cookie(response, start_session(session, user_id=account.id),
                       secure=ctx.settings.public_url.startswith("https"))
    return response
