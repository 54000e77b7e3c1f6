"""``DirectRoute``: an API route documented like any other (its endpoint's signature gives the OpenAPI body,
parameters and response), but served by a plain ``Request -> Response`` handler named with ``@served_by``,
without FastAPI's per-request machinery: dependency solving, JSON decoding into a dict and then validation,
response validation and encoding, telemetry context.

Why: on the trainer's metrics webhook that machinery cost more than the rest of the request together
(85 of 260 µs of CPU per event, docs/benchmarks.md "Webhook ingest"). Use it for hot paths only: the handler
must keep the signature's promises itself (authenticate with the same function the dependency uses, validate
the body as the declared model with ``parse_body``, answer the declared shape), and every other route should
stay an ordinary one. Ground floor: it knows no domain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

Handler = Callable[[Request], Awaitable[Response]]
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
Model = TypeVar("Model", bound=BaseModel)


def served_by(handler: Handler) -> Callable[[Endpoint], Endpoint]:
    """Mark a documented endpoint as served by ``handler`` when its router's ``route_class`` is ``DirectRoute``.
    The endpoint itself stays a correct (slower) implementation of the same route."""

    def mark(endpoint: Endpoint) -> Endpoint:
        endpoint.direct_handler = handler  # type: ignore[attr-defined]
        return endpoint

    return mark


class DirectRoute(APIRoute):
    def get_route_handler(self) -> Handler:  # type: ignore[override]
        handler: Handler | None = getattr(self.endpoint, "direct_handler", None)
        return handler if handler is not None else super().get_route_handler()


def parse_body(model: type[Model], raw: bytes) -> Model:
    """``raw`` validated as ``model`` in one pass (pydantic parses the JSON itself: no intermediate dict); a bad
    body is the same ``RequestValidationError`` (422, the API's error shape) FastAPI would raise."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None


def json_response(content: Any) -> Response:
    return Response(orjson.dumps(content), media_type="application/json")
