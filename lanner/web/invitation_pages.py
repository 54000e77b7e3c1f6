"""An invitation link, opened: ``/invitations/{token}`` shows the signed-in visitor the team and the role it
offers and an Accept button (``POST /invitations/accept``, as ``POST /api/invitations/accept``). A signed-out
visitor signs in first and comes back to the link.

The token is the credential: whoever holds it sees the team's name, as an admin meant by sharing it. An unknown,
used, revoked or expired token is one page (404), the same for all, so a link tells nothing once it is spent."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, Response

from lanner.accounts.service import Principal
from lanner.deps import DbSession
from lanner.errors import Conflict, NotFound
from lanner.teams import queries, service
from lanner.web.templating import PageUser, redirect, render

router = APIRouter(include_in_schema=False)
TOKEN_MAX = 100


def _spent(request: Request, user: Principal) -> HTMLResponse:
    return _no_referrer(render(request, "invitation.html", {"offer": None}, status_code=404, user=user))


def _no_referrer(response: HTMLResponse) -> HTMLResponse:
    """The page's address holds the token: no link on it may send it on as a Referer."""
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@router.get("/invitations/{token}", response_class=HTMLResponse)
def invitation_page(request: Request, user: PageUser, session: DbSession,
                    token: Annotated[str, Path(max_length=TOKEN_MAX)]) -> Response:
    offer = queries.invitation_offer(session, token)
    if offer is None:
        return _spent(request, user)
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
