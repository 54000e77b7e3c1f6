"""Pages every visitor sees: signing in and out, and the home dashboard (the user's datasets and projects, and
the teams they are in)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from lanner.accounts import passwords
from lanner.accounts.dependencies import OptionalPrincipal, client_address
from lanner.accounts.sessions import SESSION_COOKIE, clear_session_cookie, end_session, set_session_cookie
from lanner.billing import service as billing_service
from lanner.datasets import service as datasets_service
from lanner.errors import TooManyRequests, Unauthorized
from lanner.http.deps import Ctx, DbSession
from lanner.projects import service as projects_service
from lanner.teams import service as teams_service
from lanner.web.templating import PageUser, redirect, render, safe_next

router = APIRouter(include_in_schema=False)
DASHBOARD_LIMIT = 8  # of each kind; the full lists are /datasets and /projects


def _login_page(request: Request, *, next_url: str, username: str = "", errors: dict[str, str] | None = None,
                form_error: str | None = None, status_code: int = 200) -> HTMLResponse:
    return render(request, "login.html", {"next": next_url, "username": username, "errors": errors or {},
                                          "form_error": form_error}, status_code=status_code)


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, principal: OptionalPrincipal, next: str | None = None) -> Response:
    if principal is not None:  # already signed in: straight on
        return redirect(request, safe_next(next))
    return _login_page(request, next_url=safe_next(next))


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, ctx: Ctx, username: Annotated[str, Form(max_length=64)] = "",
                password: Annotated[str, Form(max_length=1000)] = "",
                next: Annotated[str, Form(max_length=2000)] = "/") -> Response:
    """A form post (works without JavaScript): a session cookie and on to ``next``, or the form again with
    what was wrong next to the field it is about (422; 401 for a wrong password, 429 over the limits)."""
    next_url, username = safe_next(next), username.strip()
    errors = {name: f"Enter your {name}." for name, value in (("username", username), ("password", password))
              if not value}
    if errors:
        return _login_page(request, next_url=next_url, username=username, errors=errors, status_code=422)
    try:
        signed_in = await passwords.sign_in(ctx, address=client_address(request), username=username, password=password)
    except Unauthorized:
        return _login_page(request, next_url=next_url, username=username, status_code=401,
                           form_error="Wrong username or password.", errors={"password": "Check your password."})
    except TooManyRequests as exc:
        return _login_page(request, next_url=next_url, username=username, status_code=429, form_error=exc.message)
    response = redirect(request, next_url)
    set_session_cookie(response, signed_in.token, secure=ctx.settings.public_url.startswith("https"))
    return response


@router.post("/logout")
def logout(request: Request, session: DbSession) -> Response:
    """Ends the session on the server (a copied cookie stops working too), then the sign-in page."""
    end_session(session, request.cookies.get(SESSION_COOKIE))
    response = redirect(request, "/login", "You are signed out.", "info")
    clear_session_cookie(response)
    return response


@router.get("/", response_class=HTMLResponse)
def home(request: Request, user: PageUser, session: DbSession) -> Response:
    """What the user has: the newest datasets (image counts, status) and projects (model counts), credit, and the
    teams whose workspaces they share. One more than shown is read to know whether to offer "all"."""
    datasets = datasets_service.list_datasets(session, user, owner=user.username, limit=DASHBOARD_LIMIT + 1)
    projects = projects_service.list_projects(session, user, owner=user.username, limit=DASHBOARD_LIMIT + 1)
    model_counts = projects_service.model_counts(session, [p.id for p in projects])
    return render(request, "home.html", {
        "datasets": [datasets_service.dataset_view(session, d, owner=user.username)
                     for d in datasets[:DASHBOARD_LIMIT]],
        "more_datasets": len(datasets) > DASHBOARD_LIMIT,
        "projects": [{"project": p, "models": model_counts.get(p.id, 0)} for p in projects[:DASHBOARD_LIMIT]],
        "more_projects": len(projects) > DASHBOARD_LIMIT,
        "balance": billing_service.balances(session, user_id=user.user_id),
        "teams": teams_service.teams_of(session, user.user_id),
    }, user=user, active="home")
