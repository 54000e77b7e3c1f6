"""SDK ``models.predict`` and ``images.predict``: shared inference, HTTP only. The lookups are in ``service``, the
running in ``predictor``. Both routes are async: the database and the image decoding run in one threadpool hop,
inference on the predictor's threads, and the event loop only waits."""

from __future__ import annotations

import time
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from lanner.accounts.dependencies import FastPrincipal
from lanner.bounds import INT32_MAX
from lanner.errors import Unprocessable
from lanner.http.deps import Ctx
from lanner.inference import schemas, service
from lanner.inference.images import decode_image
from lanner.inference.predictor import Options, Predictor
from lanner.integrations import pixels as bucket_pixels

router = APIRouter(tags=["inference"])
PREDICT_PATH = "/api/models/{owner}/{project}/{model}/predict"


async def get_predictor(request: Request) -> Predictor:
    """Set by ``create_app``; async: no I/O."""
    return request.app.state.inference


Engine = Annotated[Predictor, Depends(get_predictor)]


def _json(body: dict[str, Any]) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


@router.post(PREDICT_PATH, summary="models.predict: run a model on one image (shared inference)",
             description="Multipart with the image as `file`, or a `source` (a signed link this server serves, or "
             "base64; multipart or urlencoded). Answers the hosted PredictResponse for the model's task. Rate "
             "limited per key (LANNER_INFERENCE_RATE_LIMIT).")
async def predict(
    owner: str, project: str, model: str, request: Request, principal: FastPrincipal, ctx: Ctx, engine: Engine,
    file: Annotated[UploadFile | None, File(description="The image (JPEG, PNG, BMP, WebP, TIFF)")] = None,
    source: Annotated[str | None, Form(description="A link this server signed, or base64 image data")] = None,
    conf: Annotated[float, Form(ge=schemas.CONF_MIN, le=schemas.CONF_MAX, allow_inf_nan=False)] = schemas.CONF_DEFAULT,
    iou: Annotated[float, Form(ge=schemas.IOU_MIN, le=schemas.IOU_MAX, allow_inf_nan=False)] = schemas.IOU_DEFAULT,
    imgsz: Annotated[int, Form(ge=schemas.IMGSZ_MIN, le=schemas.IMGSZ_MAX)] = schemas.IMGSZ_DEFAULT,
    normalize: Annotated[bool, Form()] = False,
    decimals: Annotated[int, Form(ge=schemas.DECIMALS_MIN, le=schemas.DECIMALS_MAX)] = schemas.DECIMALS_DEFAULT,
    vid_stride: Annotated[int, Form(ge=1, le=INT32_MAX, description="Accepted; one image is one frame")] = 1,
    bits: Annotated[int, Form(ge=8, le=16, description="Depth PNG bits: 8, 12 or 16")] = 8,
) -> Response:
    started = time.perf_counter()
    if bits not in schemas.DEPTH_BITS:
        raise Unprocessable("bits: must be 8, 12 or 16")
    upload = await file.read() if file is not None else None
    settings = ctx.settings
    origins = (settings.public_url, str(request.base_url))

    def prepare() -> tuple[service.Target, Any]:
        with ctx.db.session() as session:
            target = service.resolve_model(session, principal, owner=owner, project=project, model=model,
                                           blobs=ctx.blobs)
            if upload is not None:
                data, field = upload, "file"
            elif source is not None:
                data, field = service.source_bytes(
                    session, source, signer=ctx.signer, blobs=ctx.blobs, origins=origins,
                    max_bytes=settings.inference_max_bytes, settings=settings), "source"
            else:
                raise Unprocessable(f"no image: {service.NOT_AN_IMAGE}", code="no_image")
        return target, decode_image(data, max_pixels=settings.inference_max_pixels, field=field)

    target, image = await run_in_threadpool(prepare)
    options = Options(conf=conf, iou=iou, imgsz=imgsz, normalize=normalize, decimals=decimals, bits=bits)
    return _json(await engine.predict(target.weights, image, options, model_name=target.uri, started=started))


@router.post("/api/images/{image_id}/predict", summary="images.predict: auto-annotate a dataset image",
             description="Runs a workspace model (`modelId`: ul://owner/project/model) on an image of a dataset "
             "you may read and answers its predictions as dataset labels (normalized, the dataset's classes). "
             "Hosted models (sam3, yoloe26x, the language models) are not offered by a self-hosted server: 422.")
async def predict_image(image_id: str, body: schemas.ImagePredictRequest, principal: FastPrincipal, ctx: Ctx,
                        engine: Engine) -> Response:
    settings = ctx.settings

    def prepare() -> tuple[service.Target, Any, list[str]]:
        with ctx.db.session() as session:
            dataset, item = service.dataset_image(session, principal, image_id)
            target = service.resolve_model_id(session, principal, body.modelId, blobs=ctx.blobs)
            names = [str(name) for name in dataset.class_names or []]
            bucket_pixels.require_processing(session, dataset, "auto-annotation")  # the integration's AI switch
            data = service.DatasetPixels(session, settings, ctx.blobs, dataset.owner_id).read(
                item.sha256, max_bytes=settings.inference_max_bytes)
        return target, decode_image(data, max_pixels=settings.inference_max_pixels, field="image"), names

    target, image, dataset_names = await run_in_threadpool(prepare)
    if body.visualPrompts:
        raise Unprocessable("visualPrompts seed the hosted yoloe26x model, which a self-hosted Lanner does not offer")
    info = await engine.info(target.weights)
    if info.task in ("semantic", "depth"):
        raise Unprocessable(f"a {info.task} model gives dense maps, not labels: use it with models.predict")
    mapping = service.class_map(body.classMapping, model_names=info.class_names, dataset_names=dataset_names)
    labels = await engine.annotate(
        target.weights, image, conf=body.confidence if body.confidence is not None else schemas.CONF_DEFAULT,
        iou=body.iou if body.iou is not None else schemas.IOU_DEFAULT, class_map=mapping)
    return _json({"success": True, **labels, "modelUsed": target.uri})
