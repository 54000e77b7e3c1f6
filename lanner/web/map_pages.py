"""A dataset's map page: its images' embeddings laid out in 2-D (``embeddings.maps``), drawn by
``static/map.js`` with deck.gl, coloured by cluster, split, class, label status or a number, with each image's
thumbnail on hover and a lasso whose images open in the dataset's grid (a stored selection: ``?sel=``), where
the grid's filters and bulk actions apply to them.

Without embeddings the page offers to compute them (the similar strip's ``POST .../embeddings``, back here),
with the model to embed with (``similar_strip.model_choice``; when the server has none, what to do instead),
then follows the job and the layout until the map can be drawn: no dead end. Whoever may read the dataset sees
its map; a selection is its maker's alone."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from lanner.datasets import selections
from lanner.datasets import service as datasets_service
from lanner.db import after_commit
from lanner.embeddings import map_points
from lanner.embeddings.service import active_job, latest_analysis
from lanner.errors import BadRequest
from lanner.http.deps import Ctx, DbSession
from lanner.review import service as review_service
from lanner.teams import permissions
from lanner.web import similar_strip
from lanner.web.templating import PageUser, render

router = APIRouter(include_in_schema=False)


class Selection(BaseModel):
    keys: list[Annotated[str, Field(max_length=16)]] = Field(max_length=selections.MAX_IMAGES)


def _base(owner: str, slug: str) -> str:
    return f"/datasets/{owner.lower()}/{slug}"


@router.get("/datasets/{owner}/{slug}/map", response_class=HTMLResponse)
def map_page(owner: str, slug: str, request: Request, user: PageUser, session: DbSession, ctx: Ctx) -> Response:
    """The page; its script asks ``.../map/points`` for the map (or where it stands) and draws it."""
    dataset = datasets_service.get_dataset(session, user, owner=owner, slug=slug)
    job = active_job(session, dataset)
    state = "loading" if latest_analysis(session, dataset) else "embedding" if job else "none"
    can_analyse = permissions.can(session, user_id=user.user_id, owner_id=dataset.owner_id, action="write")
    return render(request, "dataset_map.html", {
        "dataset": dataset, "owner": owner.lower(), "base": _base(owner, dataset.slug), "state": state,
        "job": map_points.progress(session, ctx.settings, dataset), "can_analyse": can_analyse,
        "embed": similar_strip.model_choice(session, user, dataset, owner.lower(), can_analyse and job is None),
    }, user=user, active="datasets")


@router.get("/datasets/{owner}/{slug}/map/points")
def map_points_json(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
                    ctx: Ctx) -> Response:
    """The whole map as columns (``embeddings.map_points``), or its state while it cannot be drawn yet."""
    body, wake = map_points.points(session, user, ctx.settings, owner=owner, slug=slug)
    if body["state"] == "ready":  # the Review scores colour the map too, for the workspace's members
        dataset = datasets_service.get_dataset(session, user, owner=owner, slug=slug)
        if review_service.is_member(session, user, dataset):
            body["fields"] = [*body["fields"], *review_service.map_fields(session, dataset, body["keys"])]
    if wake:
        after_commit(session, request.app.state.embeddings.wake)
    return Response(orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json",
                    headers={"Cache-Control": "no-store"})


@router.post("/datasets/{owner}/{slug}/map/selection")
async def create_selection(owner: str, slug: str, request: Request, user: PageUser,
                           session: DbSession) -> dict[str, object]:
    """The lasso's images (``{"keys": [...]}``, their keys) kept as the visitor's selection; the grid filtered to
    them is at ``url``. The grid's "Label these" and "New dataset from these" store ticked images here too.
    The dataset is looked up before the body is read: anyone who may not read it gets its 404 whatever they
    send. The request's session, in a worker thread while this coroutine waits: inserting
    100,000 keys takes a moment the event loop should not."""
    raw = await request.body()

    def store() -> dict[str, object]:
        dataset = datasets_service.get_dataset(session, user, owner=owner, slug=slug)
        try:
            keys = Selection.model_validate_json(raw).keys
        except ValidationError as exc:
            raise BadRequest('send {"keys": [...]}: the selected images\' keys, at most '
                             f"{selections.MAX_IMAGES}") from exc
        made = selections.create(session, user, dataset, keys)
        return {"id": made.id, "count": made.count, "url": f"{_base(owner, dataset.slug)}?sel={made.id}"}

    return await run_in_threadpool(store)
