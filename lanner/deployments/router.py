"""SDK ``deployments.*`` (``/api/deployments/{owner}[/{deployment}[/health|logs|metrics|predict]]``) and the
endpoints' metrics in Prometheus text (``GET /metrics``). HTTP only: the logic is in ``deployments.service``,
the processes are the supervisor's, a predict goes through ``deployments.proxy``."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import httpx
from fastapi import APIRouter, File, Form, Query, Request, Response, UploadFile
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from lanner.accounts.dependencies import CurrentPrincipal, FastPrincipal
from lanner.bounds import INT32_MAX, PageSize
from lanner.db import after_commit
from lanner.deployments import metrics as deployment_metrics
from lanner.deployments import service, state, telemetry
from lanner.deployments.proxy import summary_of
from lanner.deployments.runtime import Endpoints
from lanner.deployments.schemas import REGION, DeploymentCreate, DeploymentUpdate, StatusName, deployment_item
from lanner.deployments.schemas import service_url as public_service_url
from lanner.errors import Unprocessable
from lanner.http.deps import Ctx, DbSession
from lanner.inference import schemas as inference
from lanner.inference.predictor import Options
from lanner.inference.service import NOT_AN_IMAGE, source_bytes

router = APIRouter(tags=["deployments"])
OWNER = "/api/deployments/{owner}"
ONE = OWNER + "/{deployment}"
HEALTH_TIMEOUT_SECONDS = 55.0  # the hosted health check's allowance for a cold start


def _item(d: Any, owner: str, ctx: Any, *, with_metadata: bool) -> dict[str, Any]:
    """``owner``: the workspace's name as the path gave it (a person's or a team's), which ``get_deployment``
    resolved."""
    item = deployment_item(d, owner=owner.lower(), with_metadata=with_metadata)
    item["serviceUrl"] = public_service_url(ctx.settings.public_url, owner.lower(), d.slug)
    return item


@router.post(OWNER, status_code=201, summary="deployments.create: a dedicated endpoint for one model",
             description="Starts `creating`; the endpoint is `ready` once its process (or Ray Serve application) "
             "answers. Served by ONNX Runtime when the model has a completed ONNX export, else by PyTorch.")
def create(owner: str, body: DeploymentCreate, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
           endpoints: Endpoints) -> dict[str, Any]:
    d = service.create_deployment(session, principal, owner=owner, body=body, settings=ctx.settings)
    after_commit(session, endpoints.changed)
    return {"id": d.id, "deployment": d.slug, "status": state.CREATING, "region": d.region,
            "message": f"deploying {d.project_slug}/{d.model_slug} with {d.runtime}"}


@router.get(OWNER, summary="deployments.list")
def list_deployments(owner: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                     status: StatusName | None = None, model: Annotated[str | None, Query(max_length=260)] = None,
                     limit: Annotated[PageSize | None, Query(le=1000)] = None) -> dict[str, Any]:
    rows, total = service.list_deployments(session, principal, owner=owner, status=status, model=model, limit=limit)
    return {"deployments": [_item(d, owner, ctx, with_metadata=False) for d in rows], "total": float(total),
            "region": REGION}


@router.get(ONE, summary="deployments.retrieve")
def retrieve(owner: str, deployment: str, principal: CurrentPrincipal, session: DbSession,
             ctx: Ctx) -> dict[str, Any]:
    d = service.get_deployment(session, principal, owner=owner, deployment=deployment)
    return {"deployment": _item(d, owner, ctx, with_metadata=True), "region": REGION}


@router.patch(ONE, summary="deployments.update: metadata, name, or start/stop/resize/replace")
def update(owner: str, deployment: str, body: DeploymentUpdate, principal: CurrentPrincipal, session: DbSession,
           ctx: Ctx, endpoints: Endpoints) -> dict[str, Any]:
    d = service.get_deployment(session, principal, owner=owner, deployment=deployment, action="train")
    status, message = service.update_deployment(session, principal, d, body, settings=ctx.settings)
    after_commit(session, endpoints.changed)
    answer: dict[str, Any] = {"success": True, "status": status, "message": message}
    if body.name is not None:
        answer["deployment"] = d.slug
    return answer


@router.delete(ONE, summary="deployments.delete: the endpoint and its process go")
def delete(owner: str, deployment: str, principal: CurrentPrincipal, session: DbSession,
           endpoints: Endpoints) -> dict[str, Any]:
    d = service.get_deployment(session, principal, owner=owner, deployment=deployment, action="train")
    service.delete_deployment(session, d)
    after_commit(session, endpoints.changed)
    return {"success": True}


@router.get(ONE + "/health", summary="deployments.health: ping (and warm) the endpoint")
async def health(owner: str, deployment: str, principal: FastPrincipal, ctx: Ctx) -> dict[str, Any]:
    def find() -> tuple[str, str | None]:
        with ctx.db.session() as session:
            d = service.get_deployment(session, principal, owner=owner, deployment=deployment)
            return d.status, d.url

    status, url = await run_in_threadpool(find)
    if status != state.READY or not url:
        return {"healthy": False, "latencyMs": 0.0, "error": f"the deployment is {status}"}
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_SECONDS) as client:
            answer = await client.get(f"{url}/health")
    except httpx.HTTPError as error:
        return {"healthy": False, "latencyMs": (time.perf_counter() - started) * 1e3,
                "error": f"not answering ({type(error).__name__})"}
    result: dict[str, Any] = {"healthy": answer.status_code == 200, "status": float(answer.status_code),
                              "latencyMs": (time.perf_counter() - started) * 1e3}
    if answer.status_code != 200:
        result["error"] = answer.text[:300]
    return result


@router.get(ONE + "/logs", summary="deployments.logs: requests and lifecycle, newest first")
def logs(owner: str, deployment: str, principal: CurrentPrincipal, session: DbSession,
         severity: Annotated[str | None, Query(max_length=200)] = None,
         limit: Annotated[PageSize | None, Query(le=telemetry.LOGS_MAX)] = None,
         pageToken: Annotated[str | None, Query(max_length=40)] = None) -> dict[str, Any]:  # noqa: N803
    d = service.get_deployment(session, principal, owner=owner, deployment=deployment)
    return telemetry.logs(session, d, severity=severity, limit=limit, page_token=pageToken)


@router.get(ONE + "/metrics", summary="deployments.metrics: requests, errors, latency percentiles over time")
def metrics(owner: str, deployment: str, principal: CurrentPrincipal, session: DbSession,
            range: Literal["1h", "6h", "24h", "7d", "30d"] = "24h",  # noqa: A002  (the SDK's name)
            sparkline: Literal["true", "false"] = "false", view: Literal["overview"] | None = None) -> dict[str, Any]:
    d = service.get_deployment(session, principal, owner=owner, deployment=deployment)
    return deployment_metrics.metrics(session, d, range_=range, sparkline=sparkline == "true",
                                      overview=view == "overview", region=d.region)


@router.get("/metrics", summary="Lanner: your endpoints' metrics in Prometheus text format",
            description="Counters (requests, errors, restarts, billed instance-seconds), gauges (ready, instances) "
            "and latency quantiles over the last 5 minutes, labelled by deployment; scrape it with your API key "
            "as a bearer token.", response_class=Response)
def prometheus(principal: CurrentPrincipal, session: DbSession) -> Response:
    rows, _ = service.list_deployments(session, principal, owner=principal.username, status=None, model=None,
                                       limit=1000)
    return Response(deployment_metrics.prometheus_text(session, rows, owner=principal.username),
                    media_type=CONTENT_TYPE_LATEST)


@router.post(ONE + "/predict", summary="deployments.predict: run the endpoint's model on one image",
             description="Multipart with the image as `file`, or a `source` (a signed link this server serves, or "
             "base64; multipart or urlencoded), with the hosted options. 409 while the deployment is not ready. "
             "No rate limit (LANNER_ENDPOINT_PATHS); the owner's key is required.")
async def predict(
    owner: str, deployment: str, request: Request, principal: FastPrincipal, ctx: Ctx, endpoints: Endpoints,
    file: Annotated[UploadFile | None, File(description="The image (JPEG, PNG, BMP, WebP, TIFF)")] = None,
    source: Annotated[str | None, Form(description="A link this server signed, or base64 image data")] = None,
    conf: Annotated[float, Form(ge=inference.CONF_MIN, le=inference.CONF_MAX, allow_inf_nan=False)] = (
        inference.CONF_DEFAULT),
    iou: Annotated[float, Form(ge=inference.IOU_MIN, le=inference.IOU_MAX, allow_inf_nan=False)] = (
        inference.IOU_DEFAULT),
    imgsz: Annotated[int, Form(ge=inference.IMGSZ_MIN, le=inference.IMGSZ_MAX)] = inference.IMGSZ_DEFAULT,
    normalize: Annotated[bool, Form()] = False,
    decimals: Annotated[int, Form(ge=inference.DECIMALS_MIN, le=inference.DECIMALS_MAX)] = (
        inference.DECIMALS_DEFAULT),
    vid_stride: Annotated[int, Form(ge=1, le=INT32_MAX, description="Accepted; one image is one frame")] = 1,
    bits: Annotated[int, Form(ge=8, le=16, description="Depth PNG bits: 8, 12 or 16")] = 8,
) -> Response:
    started = time.perf_counter()
    if bits not in inference.DEPTH_BITS:
        raise Unprocessable("bits: must be 8, 12 or 16")
    route = await endpoints.routes.get(principal, owner, deployment)
    if file is not None:
        data = await file.read()
    elif source is not None:
        data = await run_in_threadpool(_source, ctx, request, source)
    else:
        raise Unprocessable(f"no image: {NOT_AN_IMAGE}", code="no_image")
    options = Options(conf=conf, iou=iou, imgsz=imgsz, normalize=normalize, decimals=decimals, bits=bits)
    route, status, body = await endpoints.forwarder.predict(endpoints.routes, route, principal, owner, data, options,
                                                            user_agent=request.headers.get("user-agent"))
    endpoints.requests.record(telemetry.Request(
        deployment_id=route.id, path=request.url.path, status=status, latency_ms=(time.perf_counter() - started) * 1e3,
        image_bytes=len(data), user_agent=request.headers.get("user-agent"), **summary_of(status, body)))
    # The collect template (lanner/workflows): an uncertain answer is captured after it is sent, never before.
    capture = await request.app.state.workflows.consider(route.id, status, body, data, normalized=normalize)
    return Response(body, status_code=status, media_type="application/json", background=capture)


def _source(ctx: Any, request: Request, source: str) -> bytes:
    with ctx.db.session() as session:
        return source_bytes(session, source, signer=ctx.signer, blobs=ctx.blobs,
                            origins=(ctx.settings.public_url, str(request.base_url)),
                            max_bytes=ctx.settings.inference_max_bytes, settings=ctx.settings)
