"""``deployments.*``: create, find, list, change and delete dedicated endpoints, with the caller's access. The
processes themselves are the supervisor's (``deployments.supervisor``): a request only records what is wanted
(a new deployment is ``creating``, a stop is ``stopping``) and wakes it.

- A deployment is its owner's alone: another user's is a 404, as if it did not exist; creating one in
  another user's workspace is a 403.
- It serves one model of the owner's (with weights: 409 without). When the model has a completed ONNX export
  of its current weights, ONNX Runtime serves that export; otherwise PyTorch serves the checkpoint
  (``runtime``: ``auto``, or pinned by the owner).
- ``region`` is one of the SDK's regions the operator offers (``LANNER_DEPLOY_REGIONS``), which also says
  where it runs: a process on this server (``local``) or a Ray Serve application (``ray``).
- Price per instance-hour: ``cpu`` x ``LANNER_ENDPOINT_PRICE_PER_VCPU_HOUR`` + ``memoryGi`` x
  ``LANNER_ENDPOINT_PRICE_PER_GIB_HOUR``, fixed when it is created or resized.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.billing.service import dollars_to_micros
from lanner.config import Settings
from lanner.db import utcnow
from lanner.deployments import state
from lanner.deployments.models import Deployment
from lanner.deployments.schemas import REGIONS, DeploymentCreate, DeploymentUpdate
from lanner.errors import BadRequest, Conflict, Forbidden, NotFound, NotImplementedOnSelfHosted, Unprocessable
from lanner.exports import jobs as export_jobs
from lanner.exports.models import ModelExport
from lanner.exports.service import fingerprint
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord
from lanner.slugs import renamed_slug, slugify, unique_slug
from lanner.teams import permissions

BACKENDS = ("local", "ray")
DEFAULT_CPU, DEFAULT_MEMORY_GI = 1, 2


def offered_regions(settings: Settings) -> dict[str, str]:
    """Region -> where its endpoints run (``local`` or ``ray``), as ``LANNER_DEPLOY_REGIONS`` says."""
    default = "ray" if settings.executor == "ray" else "local"
    text = settings.deploy_regions.strip()
    if not text:
        return dict.fromkeys(REGIONS, default)
    if text.startswith("{"):
        try:
            mapping = json.loads(text)
        except ValueError as error:
            raise ValueError(f"LANNER_DEPLOY_REGIONS is not valid JSON: {error}") from None
        pairs = {str(k): str(v) for k, v in dict(mapping).items()}
    else:
        pairs = {part.strip(): default for part in text.split(",") if part.strip()}
    unknown = [r for r in pairs if r not in REGIONS]
    wrong = [b for b in pairs.values() if b not in BACKENDS]
    if unknown or wrong:
        raise ValueError(f"LANNER_DEPLOY_REGIONS: unknown region(s) {unknown} or target(s) {wrong} (targets: "
                         f"{', '.join(BACKENDS)})")
    return pairs


def price_micros_per_hour(settings: Settings, *, cpu: int, memory_gi: int) -> int:
    return dollars_to_micros(cpu * settings.endpoint_price_per_vcpu_hour
                             + memory_gi * settings.endpoint_price_per_gib_hour)


def _workspace_id(session: Session, principal: Principal, owner: str, action: str) -> str | None:
    """The id of workspace ``owner`` (the caller's own, or a team of theirs) when the caller may ``action`` there
    (a viewer reads a team's endpoints, an editor runs them); None for anyone else's; a member whose role is too
    low gets the permission table's 403."""
    if not principal.user_id:
        return None
    try:
        return permissions.workspace_for(session, user_id=principal.user_id, username=principal.username,
                                         owner=owner, action=action)[0]
    except NotFound:
        return None


def get_deployment(session: Session, principal: Principal, *, owner: str, deployment: str,
                   action: str = "read") -> Deployment:
    """Deployment ``owner/deployment`` of a workspace the caller may ``action`` in; anything else (another
    user's, a team the caller is not in, a deleted one) is a 404."""
    owner_id = _workspace_id(session, principal, owner, action)
    found = None if owner_id is None else session.scalar(select(Deployment).where(
        Deployment.owner_id == owner_id, Deployment.slug == deployment, Deployment.deleted_at.is_(None)))
    if found is None:
        raise NotFound(f"deployment '{owner}/{deployment}' not found")
    return found


def list_deployments(session: Session, principal: Principal, *, owner: str, status: str | None, model: str | None,
                     limit: int | None) -> tuple[list[Deployment], int]:
    """The workspace's deployments, newest first, and how many match; someone else's list is empty."""
    owner_id = _workspace_id(session, principal, owner, "read")
    if owner_id is None:
        return [], 0
    query = select(Deployment).where(Deployment.owner_id == owner_id, Deployment.deleted_at.is_(None))
    if status:
        query = query.where(Deployment.status == status)
    if model:
        project_slug, _, model_slug = model.partition("/")
        query = query.where(Deployment.project_slug == project_slug, Deployment.model_slug == model_slug)
    total = int(session.scalar(select(func.count()).select_from(query.subquery())) or 0)
    rows = session.scalars(query.order_by(Deployment.created_at.desc(), Deployment.id).limit(limit or 100))
    return list(rows), total


def for_model(session: Session, principal: Principal, record: ModelRecord) -> list[Deployment]:
    """The deployments of one model in its own workspace (the model page: the caller may read the model)."""
    if not permissions.readable_owner(session, user_id=principal.user_id, owner_id=record.owner_id):
        return []
    return list(session.scalars(select(Deployment).where(
        Deployment.owner_id == record.owner_id, Deployment.model_id == record.id, Deployment.deleted_at.is_(None))
        .order_by(Deployment.created_at.desc(), Deployment.id)))


def onnx_export(session: Session, record: ModelRecord) -> ModelExport | None:
    """The model's completed ONNX export of its current weights (FP32 preferred, then the newest), if any: its
    fingerprint, recomputed from the weights' digest and its own arguments, proves what it was made from."""
    if not record.weights_sha256:
        return None
    candidates = session.scalars(select(ModelExport).where(
        ModelExport.model_id == record.id, ModelExport.format == "onnx", ModelExport.status == export_jobs.COMPLETED,
        ModelExport.sha256.is_not(None)).order_by(ModelExport.completed_at.desc()))
    exact = [job for job in candidates
             if job.fingerprint == fingerprint(record.weights_sha256, "onnx", job.args or {}, job.gpu_type)]
    exact.sort(key=lambda job: (job.args or {}).get("quantize") is not None)  # stable: newest FP32 first
    return exact[0] if exact else None


def _serve(session: Session, record: ModelRecord, runtime: str | None) -> dict[str, Any]:
    """What a deployment of ``record`` serves: the columns that say so."""
    uri = f"{record.project.slug}/{record.slug}"
    if not record.weights_sha256:
        raise Conflict(f"model '{uri}' has no weights yet: train it, or upload a checkpoint", code="no_weights")
    export = onnx_export(session, record) if runtime in (None, "auto", "onnx") else None
    if runtime == "onnx" and export is None:
        raise Conflict(f"model '{uri}' has no completed ONNX export of its weights: export it (format onnx) "
                       "first, or deploy with runtime 'auto'", code="no_onnx_export")
    chosen = {"weights_sha256": record.weights_sha256, "task": record.task, "model_id": record.id,
              "project_slug": record.project.slug, "model_slug": record.slug}
    if export is not None:
        return {**chosen, "runtime": "onnx", "export_id": export.id, "artefact_sha256": export.sha256}
    return {**chosen, "runtime": "pytorch", "export_id": None, "artefact_sha256": record.weights_sha256}


def create_deployment(session: Session, principal: Principal, *, owner: str, body: DeploymentCreate,
                      settings: Settings) -> Deployment:
    owner_id = _workspace_id(session, principal, owner, "train")
    if owner_id is None:
        raise Forbidden("deployments are created in your own workspace (use your username as owner) or in a team "
                        "where you are an editor")
    regions = offered_regions(settings)
    if body.region not in regions:
        offered = ", ".join(sorted(regions)) if len(regions) < len(REGIONS) else "one of the SDK's region ids"
        raise Unprocessable(f"region: '{body.region[:40]}' is not offered by this server (offered: {offered})",
                            code="region_not_offered")
    record = projects_service.get_model(session, principal, owner=owner, project=body.project, model=body.model,
                                        write=True)
    serve = _serve(session, record, body.runtime)
    base = slugify(body.deployment)[:100].strip("-")
    if not base:
        raise Unprocessable("deployment: the name needs a letter or a digit")
    taken = session.scalars(select(Deployment.slug).where(Deployment.owner_id == owner_id,
                                                          Deployment.slug.like(f"{base}%")))
    cpu, memory = body.cpu or DEFAULT_CPU, body.memoryGi or DEFAULT_MEMORY_GI
    backend = regions[body.region]
    deployment = Deployment(
        owner_id=owner_id, slug=unique_slug(base, list(taken)), name=body.name.strip() or base,
        region=body.region, backend=backend, status=state.CREATING, cpu=cpu, memory_gi=memory,
        min_instances=1, max_instances=(body.maxInstances or 1) if backend == "ray" else 1, metadata_={},
        price_micros_per_hour=price_micros_per_hour(settings, cpu=cpu, memory_gi=memory), **serve)
    reason = f"{serve['runtime']} serving {serve['project_slug']}/{serve['model_slug']} in {body.region} ({backend})"
    return state.create(session, deployment, reason=reason)


def update_deployment(session: Session, principal: Principal, deployment: Deployment, body: DeploymentUpdate,
                      *, settings: Settings) -> tuple[str, str]:
    """Apply exactly one change; returns (status, message) for the answer."""
    given = [k for k in ("metadata", "name", "action") if getattr(body, k) is not None]
    if len(given) != 1:
        raise BadRequest("send exactly one of metadata, name or action")
    if body.metadata is not None:
        deployment.metadata_ = dict(body.metadata)
        return deployment.status, "metadata updated"
    if body.name is not None:
        deployment.slug = _renamed(session, deployment, body.name)
        deployment.name = body.name.strip()
        return deployment.status, f"renamed: its URL is now .../{deployment.slug}"
    action = body.action
    if action == "camera":
        raise NotImplementedOnSelfHosted("always-on RTSP camera inference is a hosted-platform feature a "
                                         "self-hosted Lanner does not offer: send frames to predict instead")
    if action == "stop":
        return stop(session, deployment, reason="stopped by its owner")
    if action == "start":
        return start(session, deployment)
    if action == "resize":
        if body.cpu is None and body.memoryGi is None:
            raise BadRequest("resize takes cpu and/or memoryGi")
        deployment.cpu = body.cpu or deployment.cpu
        deployment.memory_gi = body.memoryGi or deployment.memory_gi
        deployment.price_micros_per_hour = price_micros_per_hour(settings, cpu=deployment.cpu,
                                                                 memory_gi=deployment.memory_gi)
        return roll_out(session, deployment, f"resized to {deployment.cpu} vCPU, {deployment.memory_gi} GiB")
    if not body.project or not body.model:
        raise BadRequest("replace takes project and model")
    record = projects_service.get_model(session, principal, owner=principal.username, project=body.project,
                                        model=body.model, write=True)
    for key, value in _serve(session, record, None).items():
        setattr(deployment, key, value)
    return roll_out(session, deployment, f"replaced by {body.project}/{body.model} ({deployment.runtime})")


def _renamed(session: Session, deployment: Deployment, name: str) -> str:
    def taken(slug: str) -> bool:
        return session.scalar(select(Deployment.id).where(Deployment.owner_id == deployment.owner_id,
                                                          Deployment.slug == slug)) is not None

    return renamed_slug(name, deployment.slug, taken=taken, what="deployment")


def roll_out(session: Session, deployment: Deployment, reason: str) -> tuple[str, str]:
    """A new revision (another model, other resources): a ready endpoint is deployed again (its process replaced);
    a stopped or failed one takes the change when it is started; one still deploying picks it up at its next
    launch."""
    if deployment.status == state.READY:  # the running process is retired (the supervisor stops it) and replaced
        state.transition(session, deployment, state.DEPLOYING, reason=reason, retry_at=utcnow(), crashes=0,
                         ready_at=None, external_id=_retire(deployment.external_id))
    elif deployment.status == state.DEPLOYING:
        deployment.external_id = _retire(deployment.external_id)
        deployment.retry_at = utcnow()
        state.log(session, deployment.id, reason)
    else:
        state.log(session, deployment.id, reason)
    return deployment.status, reason


RETIRING = "retiring:"  # external_id of a process the supervisor must stop before launching the next


def _retire(external_id: str | None) -> str | None:
    return f"{RETIRING}{external_id}" if external_id and not external_id.startswith(RETIRING) else external_id


def stop(session: Session, deployment: Deployment, *, reason: str) -> tuple[str, str]:
    if deployment.status in (state.STOPPING, state.STOPPED):
        return deployment.status, f"already {deployment.status}"
    if deployment.status == state.FAILED:
        return deployment.status, "already failed: nothing runs"
    state.transition(session, deployment, state.STOPPING, reason=reason)
    return deployment.status, "stopping: its process is being shut down"


def start(session: Session, deployment: Deployment) -> tuple[str, str]:
    if deployment.status in state.RUNNING:
        return deployment.status, f"already {deployment.status}"
    if deployment.status == state.STOPPING:
        raise Conflict("this deployment is stopping: start it once it is stopped")
    state.transition(session, deployment, state.DEPLOYING, reason="started by its owner", crashes=0,
                     retry_at=utcnow(), ready_at=None)
    return deployment.status, "deploying: its process is starting"


def delete_deployment(session: Session, deployment: Deployment) -> None:
    """Gone for the owner at once (its name is free again); the supervisor stops the process, settles the bill
    and removes the row."""
    if deployment.status in state.RUNNING:
        state.transition(session, deployment, state.STOPPING, reason="deleted by its owner")
    else:
        state.log(session, deployment.id, "deleted by its owner")
    deployment.deleted_at = utcnow()
    deployment.slug = f"-{deployment.id}"  # live slugs never start with '-'
