"""The account page: plan, credit (live), holds of queued and running runs, what each run cost, spend over time
(a uPlot chart) and the transactions, page by page. Everything comes from the billing services the billing API
uses; model names from the projects service."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from lanner.billing import history
from lanner.billing import service as billing_service
from lanner.http.deps import DbSession
from lanner.projects import service as projects_service
from lanner.web import live
from lanner.web.templating import PageUser, is_fragment_request, money, render

router = APIRouter(include_in_schema=False)
PER_PAGE = 20
SPEND_RANGES = (30, 90, 365)
LIVE_INTERVAL_SECONDS = 3.0


def _credit(session: Session, user_id: str) -> dict[str, str]:
    """The credit figures as the page shows them; also each event of the live stream."""
    balance = billing_service.balances(session, user_id=user_id)
    return {"available": money(balance.available), "held": money(balance.held), "total": money(balance.total)}


def _chart(series: list[tuple[Any, int]]) -> dict[str, list[float]]:
    """Spend per day as uPlot's columns: x in Unix seconds (midnight UTC), y in dollars."""
    days = [datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp() for d, _ in series]
    return {"x": days, "spend": [micros / 1_000_000 for _, micros in series]}


def _transactions(session: Session, user_id: str, page: int) -> dict[str, Any]:
    pages = max(1, math.ceil(history.transaction_count(session, user_id=user_id) / PER_PAGE))
    page = min(max(page, 1), pages)
    entries = history.transaction_page(session, user_id=user_id, offset=(page - 1) * PER_PAGE, limit=PER_PAGE)
    return {"entries": entries, "page": page, "pages": pages}


@router.get("/account", response_class=HTMLResponse)
def account(request: Request, user: PageUser, session: DbSession, page: int = Query(1, ge=1, le=1_000_000),
            days: int = 30) -> Response:
    """The whole page, or (htmx) just the transactions table when paging through it."""
    transactions = _transactions(session, user.user_id, page)
    if is_fragment_request(request):  # only the table pages by htmx: skip the other reads
        return render(request, "account.html", {**transactions, "models": _models(session, user.user_id,
                      transactions["entries"])}, fragment="_transactions.html", user=user)
    days = days if days in SPEND_RANGES else SPEND_RANGES[0]
    holds = history.active_holds(session, user_id=user.user_id)
    costs = history.run_costs(session, user_id=user.user_id)
    spend = history.daily_spend(session, user_id=user.user_id, days=days)
    return render(request, "account.html", {
        **transactions,
        "credit": _credit(session, user.user_id),
        "holds": holds, "costs": costs,
        "models": _models(session, user.user_id, transactions["entries"], holds, costs),
        "days": days, "ranges": SPEND_RANGES, "chart": _chart(spend),
        "spend_total": sum(micros for _, micros in spend),
    }, fragment="_transactions.html", user=user, active="account")


def _models(session: Session, user_id: str, entries: list[history.Entry], *more: list[history.RunAmount]
            ) -> dict[str, projects_service.ModelRef]:
    ids = {e.transaction.model_id for e in entries if e.transaction.model_id}
    ids |= {item.model_id for items in more for item in items if item.model_id}
    return projects_service.model_refs(session, ids, owner_id=user_id)


@router.get("/account/live")
def account_live(request: Request, user: PageUser) -> Response:
    """The credit figures as Server-Sent Events (``balance``), whenever they change: a run's hold and charges
    move them while the page is open."""
    return live.stream(request, lambda session: _credit(session, user.user_id), event="balance",
                       interval=LIVE_INTERVAL_SECONDS)
