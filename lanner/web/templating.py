"""Rendering pages: the one Jinja environment, ``render`` (a full page, or its fragment for htmx), one-time
messages (flash), the signed-in visitor (``PageUser``), static URLs that carry their content hash, and the
filters every page formats with (money, times, byte sizes)."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from lanner.accounts.csrf import CSRF_FIELD, CSRF_HEADER, csrf_token
from lanner.accounts.dependencies import OptionalPrincipal
from lanner.accounts.principal import Principal
from lanner.http.deps import DbSession

WEB_DIR = Path(__file__).parent
STATIC_DIR = WEB_DIR / "static"  # mounted at /static by lanner.web.site.install
FLASH_COOKIE = "lanner_flash"
_FLASH_PURPOSE = "flash"
FLASH_KINDS = ("success", "error", "info")


# --- static files with their content hash in the URL (served ``immutable``) ---------------------------------------

@functools.cache
def _content_hash(name: str) -> str:
    path = (STATIC_DIR / name).resolve()
    if STATIC_DIR.resolve() not in path.parents or not path.is_file():
        raise ValueError(f"no static file {name!r}")
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def static_url(name: str) -> str:
    """``/static/<name>?v=<hash>``: a changed file is a new URL, so browsers may keep each one forever."""
    return f"/static/{name}?v={_content_hash(name)}"


# --- filters ---------------------------------------------------------------------------------------------------

def money(micros: int | None, *, signed: bool = False) -> str:
    """``$1.23``, in whole cents (half a cent rounds up); an amount under a cent (a few seconds' charge) is
    ``<$0.01``, never a $0.00 that hides it. ``signed``: ``+$1.00``."""
    if micros is None:
        return ""
    sign = "-" if micros < 0 else ("+" if signed and micros > 0 else "")
    value = abs(micros)
    if 0 < value < 10_000:
        return f"{sign}<$0.01"
    return f"{sign}${(value + 5_000) // 10_000 / 100:,.2f}"


def _datetime(value: datetime | str) -> datetime:
    """A datetime, or the API's ISO text of one (``2026-12-04T13:05:00Z``), as an aware datetime."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def when(value: datetime | str | None, *, date_only: bool = False) -> str:
    """``2026-12-04 13:05 UTC``, or ``2026-12-04``."""
    if not value:
        return ""
    return _datetime(value).astimezone(UTC).strftime("%Y-%m-%d" if date_only else "%Y-%m-%d %H:%M UTC")


def iso_time(value: datetime | str | None) -> str:
    return _datetime(value).astimezone(UTC).isoformat().replace("+00:00", "Z") if value else ""


def size(value: float | int | None) -> str:
    """``1.2 MB`` (powers of 1000, as disks are sold)."""
    amount = float(value or 0)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if amount < 1000 or unit == "TB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    return ""


templates = Jinja2Templates(directory=str(WEB_DIR / "templates"))
templates.env.filters.update(money=money, when=when, iso_time=iso_time, size=size)
templates.env.globals.update(static_url=static_url, csrf_field=CSRF_FIELD, csrf_header=CSRF_HEADER)


# --- who is looking ----------------------------------------------------------------------------------------------

class SignInRequired(Exception):
    """A page needs a signed-in visitor; ``lanner.web.site`` turns this into a redirect to the sign-in page."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def _page_principal(request: Request, principal: OptionalPrincipal, session: DbSession) -> Principal:
    if principal is None:
        session.commit()  # keep what the lookup did (an expired session's row deleted): raising rolls back
        raise SignInRequired(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
    return principal


PageUser = Annotated[Principal, Depends(_page_principal)]


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a path on this site only (never ``//host`` or ``https://host``)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def sign_in_url(next_url: str) -> str:
    return "/login" if next_url in ("", "/") else f"/login?next={quote(next_url, safe='/')}"


# --- one-time messages -----------------------------------------------------------------------------------------

def _signer(request: Request) -> Any:
    return request.app.state.lanner.signer


def flash(request: Request, response: Response, message: str, kind: str = "success") -> Response:
    """Show ``message`` once, on the next page this browser renders (after a redirect). Signed, so nobody can
    put words on our pages through the cookie."""
    if kind not in FLASH_KINDS:
        raise ValueError(f"flash kind must be one of {FLASH_KINDS}")
    queued = [*_read_flashes(request), {"kind": kind, "message": message[:500]}][-3:]
    payload = base64.urlsafe_b64encode(json.dumps(queued).encode()).decode()
    response.set_cookie(FLASH_COOKIE, _signer(request).sign_value(_FLASH_PURPOSE, payload), max_age=300,
                        httponly=True, samesite="lax",
                        secure=request.app.state.lanner.settings.public_url.startswith("https"))
    return response


def _read_flashes(request: Request) -> list[dict[str, str]]:
    payload = _signer(request).unsign_value(_FLASH_PURPOSE, request.cookies.get(FLASH_COOKIE))
    if payload is None:
        return []
    try:
        items = json.loads(base64.urlsafe_b64decode(payload.encode()))
    except ValueError:
        return []
    return [{"kind": i["kind"], "message": str(i["message"])} for i in items
            if isinstance(i, dict) and i.get("kind") in FLASH_KINDS and "message" in i]


def redirect(request: Request, url: str, message: str | None = None, kind: str = "success") -> Response:
    """After a form post: 303 to ``url`` (an htmx request gets ``HX-Redirect``, which htmx follows as a full page
    load), optionally with a one-time message shown there."""
    if request.headers.get("hx-request") == "true":
        response: Response = Response(status_code=204, headers={"HX-Redirect": url})
    else:
        response = RedirectResponse(url, status_code=303)
    return flash(request, response, message, kind) if message else response


# --- rendering ---------------------------------------------------------------------------------------------------

def is_fragment_request(request: Request) -> bool:
    """An htmx request that swaps part of the page (a boosted one wants the whole page)."""
    return request.headers.get("hx-request") == "true" and request.headers.get("hx-boosted") != "true"


def render(request: Request, template: str, context: Mapping[str, Any] | None = None, *,
           fragment: str | None = None, status_code: int = 200, user: Principal | None = None,
           active: str | None = None) -> HTMLResponse:
    """The page ``template`` (which extends ``base.html``), or, for an htmx request, its ``fragment`` (a
    ``_name.html`` partial the page itself includes, so the markup exists once). ``user`` fills the navigation;
    ``active`` marks its current entry. Pages are private: never cached, and ``Vary: HX-Request``."""
    partial = fragment is not None and is_fragment_request(request)
    flashes = [] if partial else _read_flashes(request)
    values = {"user": user, "active": active, "flashes": flashes, "csrf_token": csrf_token(request),
              **(context or {})}
    response = templates.TemplateResponse(request, fragment if partial else template, values,
                                          status_code=status_code)
    response.headers["Cache-Control"] = "no-store"
    response.headers["Vary"] = "HX-Request"
    if flashes:
        response.delete_cookie(FLASH_COOKIE, httponly=True, samesite="lax")
    return response
