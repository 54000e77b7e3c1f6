"""The labelling assistant of a dataset: its settings and state, and "label next". HTTP only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.annotation.service import editable_dataset
from lanner.assistant import service
from lanner.assistant.dependencies import Loop
from lanner.assistant.schemas import AssistantUpdate
from lanner.db import after_commit
from lanner.http.deps import DbSession
from lanner.training.dependencies import CurrentCatalogue

router = APIRouter(tags=["assistant"])
PATH = "/api/datasets/{owner}/{dataset}/assistant"


@router.get(PATH, summary="The dataset's labelling assistant: settings, state, rounds and their mAP50")
def retrieve(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    record = editable_dataset(session, principal, owner=owner, slug=dataset)
    return service.view(session, record, service.find(session, record))


@router.put(PATH, summary="Turn the assistant on or off and set when and how its rounds train")
def update(owner: str, dataset: str, body: AssistantUpdate, principal: CurrentPrincipal, session: DbSession,
           catalogue: CurrentCatalogue, loop: Loop) -> dict[str, Any]:
    record = editable_dataset(session, principal, owner=owner, slug=dataset, write=True)
    assistant = service.update(session, record, body, catalogue=catalogue, tier=service.payer_tier(session, record))
    after_commit(session, loop.wake)
    return service.view(session, record, assistant)


@router.get("/api/datasets/{owner}/{dataset}/label-next",
            summary="Unlabelled images, those the newest assistant is least sure of first")
def label_next(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
               limit: Annotated[int, Query(ge=1, le=200)] = 20) -> dict[str, Any]:
    record = editable_dataset(session, principal, owner=owner, slug=dataset)
    return service.label_next(session, record, service.find(session, record), limit=limit)
