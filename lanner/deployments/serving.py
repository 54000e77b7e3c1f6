"""What a serving process does with one request, shared by the local process (``deployments.server``) and the
Ray Serve replica (``deployments.ray_app``): no database, no HTTP framework, only ``lanner.inference``.

The server forwards ``POST /predict`` with the image as the raw body and the options in the query string
(already checked against the hosted ranges, checked again here: the process trusts nobody). The answer is the
hosted ``PredictResponse``, or ``{"error", "code"}`` with the status the API would give (415 not an image, 422
a corrupt image or a bad option), which the server passes on unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import numpy as np
import orjson

from lanner.errors import LannerError, Unprocessable
from lanner.inference import schemas
from lanner.inference.images import decode_image
from lanner.inference.predictor import Options

SPEC_ENV = "LANNER_ENDPOINT_SPEC"  # the serving process's instructions, JSON
ERROR_PREFIX = "lanner-endpoint:"  # a line the supervisor shows as the reason a process stopped
EXIT_UNSERVABLE = 3  # the model cannot be served (bad weights): restarting cannot help
EXIT_PORT_TAKEN = 4  # the port was taken meanwhile: the next launch picks another

Run = Callable[[np.ndarray, Options], Awaitable[dict[str, Any]]]


def options_from(query: Mapping[str, str]) -> Options:
    """The request's options from the forwarded query string (the hosted defaults for what is absent)."""

    def number(name: str, kind: type, low: float, high: float, default: Any) -> Any:
        text = query.get(name)
        if text is None or text == "":
            return default
        try:
            value = kind(text)
        except ValueError:
            raise Unprocessable(f"{name}: not a number ({text[:20]})") from None
        if not low <= value <= high:
            raise Unprocessable(f"{name}: must be between {low} and {high}")
        return value

    bits = number("bits", int, 8, 16, 8)
    if bits not in schemas.DEPTH_BITS:
        raise Unprocessable("bits: must be 8, 12 or 16")
    return Options(conf=number("conf", float, schemas.CONF_MIN, schemas.CONF_MAX, schemas.CONF_DEFAULT),
                   iou=number("iou", float, schemas.IOU_MIN, schemas.IOU_MAX, schemas.IOU_DEFAULT),
                   imgsz=number("imgsz", int, schemas.IMGSZ_MIN, schemas.IMGSZ_MAX, schemas.IMGSZ_DEFAULT),
                   normalize=query.get("normalize", "false").lower() == "true",
                   decimals=number("decimals", int, schemas.DECIMALS_MIN, schemas.DECIMALS_MAX,
                                   schemas.DECIMALS_DEFAULT), bits=bits)


def query_of(options: Options) -> dict[str, str]:
    """``options`` as the server forwards them."""
    return {"conf": repr(options.conf), "iou": repr(options.iou), "imgsz": str(options.imgsz),
            "normalize": "true" if options.normalize else "false", "decimals": str(options.decimals),
            "bits": str(options.bits)}


def error_answer(error: BaseException) -> tuple[int, bytes]:
    if isinstance(error, LannerError):
        return error.status_code, orjson.dumps({"error": error.message, "code": error.code})
    return 500, orjson.dumps({"error": f"the endpoint failed to run the model ({type(error).__name__})",
                              "code": "endpoint_error"})


async def predict(body: bytes, query: Mapping[str, str], *, max_pixels: int, run: Run) -> tuple[int, bytes]:
    """One forwarded predict: (status, JSON body). Decoding runs off the event loop."""
    try:
        options = options_from(query)
        image = await asyncio.to_thread(decode_image, body, max_pixels=max_pixels, field="file")
        return 200, orjson.dumps(await run(image, options))
    except Exception as error:  # every failure is one answer, never a dead process
        return error_answer(error)
