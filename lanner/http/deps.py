"""FastAPI dependencies every router shares: the app context and one database session per request. Who is
calling is the accounts domain's business (``lanner.accounts.dependencies``): this module knows no domain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from lanner.context import AppContext


async def get_ctx(request: Request) -> AppContext:
    """Async on purpose: FastAPI runs a sync dependency in the threadpool, a hop per request for a lookup."""
    return request.app.state.lanner


Ctx = Annotated[AppContext, Depends(get_ctx)]


def get_session(ctx: Ctx) -> Iterator[Session]:
    """One unit of work per request: committed when the endpoint returns, rolled back when it raises."""
    with ctx.db.session() as session:
        yield session


# scope="function": the commit happens before the response is sent (FastAPI's default ends a yield dependency
# after the response), so a client that is told "done" and asks again reads what it was told, and a commit
# that fails is the request's error, not a silent loss after a 200.
DbSession = Annotated[Session, Depends(get_session, scope="function")]
