"""SDK ``lifecycle.*`` endpoints (the trash): HTTP only, the logic is in ``trash``. ``explore.search`` is in
``explore_router``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.bounds import PageSize, RowId
from lanner.datasets import trash as trash_service
from lanner.datasets.schemas import EmptyTrashRequest, TrashRequest
from lanner.http.deps import Ctx, DbSession
from lanner.storage.references import collect_after_commit

router = APIRouter(tags=["datasets"])
OWNER = Query(default=None, max_length=100, description="Lanner: a team's trash instead of yours (listing: any "
              "member; emptying: editors and above)")


@router.get("/api/trash")
def trash(principal: CurrentPrincipal, session: DbSession, page: RowId = 1,
          limit: Annotated[PageSize, Query(le=100)] = 20, type: str | None = None, id: str | None = None,
          owner: str | None = OWNER) -> dict[str, Any]:
    return trash_service.listing(session, principal, page=page, limit=limit, type=type, item_id=id, owner=owner)


@router.post("/api/trash")
def restore_from_trash(body: TrashRequest, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    trash_service.restore_item(session, principal, type=body.type, item_id=body.id)
    return {"success": True}


@router.delete("/api/trash")
def empty_trash(principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                body: EmptyTrashRequest = Body(default_factory=EmptyTrashRequest),
                owner: str | None = OWNER) -> dict[str, Any]:
    """Body ``{id, type}`` deletes one item for good; ``{all: true}`` empties the trash. The bytes nothing else
    uses go once the deletion has committed."""
    count, released = trash_service.empty(session, principal, body.model_dump(exclude_none=True), owner=owner)
    collect_after_commit(session, ctx, released)
    return {"success": True, "deletedCount": count}

