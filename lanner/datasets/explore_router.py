"""SDK ``explore.search`` endpoint: public datasets and projects, found by name and task. HTTP only, the logic is
in ``service.explore``; a router of its own because searching is neither the trash nor one dataset."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.bounds import BigCount, PageSize
from lanner.datasets import service
from lanner.http.deps import DbSession

router = APIRouter(tags=["datasets"])


@router.get("/api/explore/search")
def explore(principal: CurrentPrincipal, session: DbSession, q: str | None = None, type: str | None = None,
            task: str | None = None, offset: BigCount = 0, limit: Annotated[PageSize, Query(le=100)] = 20,
            sort: str | None = None) -> dict[str, Any]:
    return service.explore(session, q=q, type=type, task=task, limit=limit, offset=offset)
