"""The annotate API: one image's labels with its revision (read, save), the models that may propose labels for
a dataset, and their proposals. HTTP only; the logic is in ``service`` and ``proposals``. Every route is the
dataset owner's: anyone else gets the 404 a missing dataset gets."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.annotation import proposals, service
from lanner.annotation.schemas import ProposalsRequest, SaveLabels
from lanner.http.deps import Ctx, DbSession
from lanner.inference.predictor import Predictor

router = APIRouter(tags=["annotation"])
BASE = "/api/datasets/{owner}/{dataset}"


async def get_predictor(request: Request) -> Predictor:
    """The app's shared-inference predictor (``create_app``); async: no I/O."""
    return request.app.state.inference


Engine = Annotated[Predictor, Depends(get_predictor)]


@router.get(BASE + "/annotate/{key}", summary="One image for the editor: labels, revision, neighbours")
def annotate_image(owner: str, dataset: str, key: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                   filter: Annotated[str | None, Query(max_length=20, description="'unlabelled': neighbours "
                                                       "among images never labelled")] = None) -> dict[str, Any]:
    record = service.editable_dataset(session, principal, owner=owner, slug=dataset)
    return service.annotate_view(session, record, key, signer=ctx.signer, filter=filter)


@router.put(BASE + "/annotate/{key}", summary="Save one image's labels (409 on a stale revision; a retried "
            "editId is applied once)")
def save_image_labels(owner: str, dataset: str, key: str, body: SaveLabels, principal: CurrentPrincipal,
                      session: DbSession) -> dict[str, Any]:
    record = service.editable_dataset(session, principal, owner=owner, slug=dataset, write=True)
    return service.save_labels(session, principal, record, key, body)


@router.get(BASE + "/proposal-models", summary="Models with weights you may read that fit the dataset's task")
def proposal_models(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    record = service.editable_dataset(session, principal, owner=owner, slug=dataset)
    return {"models": proposals.proposal_models(session, principal, record)}


@router.post(BASE + "/proposals", summary="Labels a model proposes for images of the dataset")
def propose_labels(owner: str, dataset: str, body: ProposalsRequest, principal: CurrentPrincipal,
                   session: DbSession, ctx: Ctx, engine: Engine) -> dict[str, Any]:
    """Sync on purpose: FastAPI runs it on its threadpool, so loading the model and inference never block the
    event loop."""
    record = service.editable_dataset(session, principal, owner=owner, slug=dataset, write=True)
    model, _ = proposals.resolve_model(session, principal, body.model)
    return service.propose(session, ctx, record, model, body.keys, body.conf, predictor=engine)


@router.get(BASE + "/proposals/acceptance", summary="Proposals shown and accepted unchanged on saved images")
def proposal_acceptance(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
                        modelId: Annotated[str | None, Query(max_length=32)] = None) -> dict[str, Any]:
    record = service.editable_dataset(session, principal, owner=owner, slug=dataset)
    return service.acceptance(session, record.id, modelId)
