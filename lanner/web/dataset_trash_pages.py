"""The datasets' trash: the visitor's own or a team's (``?owner=``), and restoring from it (an editor's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response

from lanner.datasets import trash as trash_service
from lanner.errors import LannerError, NotFound
from lanner.http.deps import DbSession
from lanner.web import workspaces
from lanner.web.templating import PageUser, redirect, render
from lanner.web.workspaces import trash_path

router = APIRouter(include_in_schema=False)


@router.get("/datasets/trash", response_class=HTMLResponse)
def trash_page(request: Request, user: PageUser, session: DbSession,
               owner: str | None = Query(None, max_length=64)) -> Response:
    """The visitor's trash, or (``owner``) a team's they are in; restoring takes an editor there."""
    ws = workspaces.workspace(session, user, owner)
    listed = trash_service.listing(session, user, page=1, limit=100, type="dataset", item_id=None,
                                   owner=ws["owner"])
    return render(request, "dataset_trash.html", {"items": listed["items"], "total": listed["total"], "ws": ws,
                                                  "list_base": "/datasets/trash"},
                  user=user, active="datasets")


@router.post("/datasets/trash/{dataset_id}/restore")
def restore_dataset(dataset_id: str, request: Request, user: PageUser, session: DbSession,
                    owner: Annotated[str, Form(max_length=64)] = "") -> Response:
    back = trash_path(user, owner)
    try:
        trash_service.restore_item(session, user, type="dataset", item_id=dataset_id)
    except NotFound:
        return redirect(request, back, "That dataset is no longer in the trash.", "error")
    except LannerError as exc:  # a viewer of the team: restoring takes an editor
        return redirect(request, back, exc.message, "error")
    return redirect(request, back, "Dataset restored.")
