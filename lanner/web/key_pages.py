"""The API keys page: list, create (the key is shown once, with a copy button), revoke. The same account
services as ``/api/api-keys``; a revoked key is dropped from the key cache at once, as the API does.

Forms post normally (303 back to the page, or the page with the new key); with htmx the same routes answer with
the ``_keys.html`` fragment, which the page includes, so the markup exists once."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.errors import NotFound
from lanner.http.deps import Ctx, DbSession
from lanner.web.templating import PageUser, is_fragment_request, redirect, render

router = APIRouter(include_in_schema=False)
NAME_MAX = 100


def _page(request: Request, session: Session, user: Principal, *, status_code: int = 200,
          **context: Any) -> HTMLResponse:
    values = {"keys": accounts_service.list_api_keys(session, user_id=user.user_id), "errors": {}, "name": "",
              "new_key": None, "notice": None, "section": "keys", **context}
    response = render(request, "keys.html", values, fragment="_keys.html", status_code=status_code, user=user,
                      active="account")
    if values["new_key"]:
        response.headers["Referrer-Policy"] = "no-referrer"
    return response


@router.get("/account/keys", response_class=HTMLResponse)
def keys_page(request: Request, user: PageUser, session: DbSession) -> Response:
    return _page(request, session, user)


@router.post("/account/keys", response_class=HTMLResponse)
def create_key(request: Request, user: PageUser, session: DbSession,
               name: Annotated[str, Form()] = "") -> Response:
    """A new key, shown in this answer only (it is stored as a digest): the page, not a redirect, so the key is
    never in a URL, a cookie or the browser's history."""
    name = name.strip()
    error = "Give the key a name, such as the machine or program that will use it." if not name else (
        f"Use at most {NAME_MAX} characters." if len(name) > NAME_MAX else None)
    if error:
        return _page(request, session, user, status_code=422, errors={"name": error}, name=name)
    owner = accounts_service.require_user(session, username=user.username)
    key, plaintext = accounts_service.create_api_key(session, user=owner, name=name)
    return _page(request, session, user, status_code=201, new_key={"name": key.name, "key": plaintext})


@router.post("/account/keys/{key_id}/revoke", response_class=HTMLResponse)
def revoke_key(key_id: str, request: Request, user: PageUser, session: DbSession, ctx: Ctx) -> Response:
    names = {k.id: k.name for k in accounts_service.list_api_keys(session, user_id=user.user_id)}
    try:
        accounts_service.revoke_api_key(session, user_id=user.user_id, key_id=key_id, cache=ctx.key_cache)
    except NotFound:
        message, kind = "That key was already revoked.", "error"
    else:
        message, kind = f"Key “{names.get(key_id, key_id)}” revoked: programs using it are refused now.", "success"
    if is_fragment_request(request):
        return _page(request, session, user, notice={"kind": kind, "message": message})
    return redirect(request, "/account/keys", message, kind)
