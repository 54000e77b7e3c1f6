"""``DirectRoute``: an API route documented like any other (its endpoint's signature gives the OpenAPI body,
parameters and response), but served by a plain ``Request -> Response`` handler named with ``@served_by``,
without FastAPI's per-request machinery: dependency solving, JSON decoding into a dict and then validation,
response validation and encoding, telemetry context.

Why: on the trainer's metrics webhook that machinery cost more than the rest of the request together
(85 of 260 µs of CPU per event, docs/benchmarks.md "Webhook ingest"). Use it for hot paths only: the handler
must keep the signature's promises itself (authenticate with the same function the dependency uses, validate
the body as the declared model with ``parse_body``, answer the declared shape), and every other route should
stay an ordinary one.

``FastLaneApp`` goes one step further for API clients: their requests to a direct route's exact path skip the
app's middleware stack and router as well (``FastLane``). Ground floor: it knows no domain.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import orjson
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

Handler = Callable[[Request], Awaitable[Response]]
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
Model = TypeVar("Model", bound=BaseModel)
_HANDLER = "lanner.fast_lane"  # the scope key that carries the matched handler through the lane's middlewares


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


async def read_body(model: type[Model], request: Request) -> Model:
    """The request's body as ``model``, read as FastAPI reads a JSON body parameter (its strict content type):
    parsed as JSON only when the request says it is JSON (``application/json``, ``+json``); no body, or a body
    of another type, gets the 422 FastAPI answers (the body missing; bytes where an object was expected)."""
    raw = await request.body()
    if raw and _says_json(request.headers.get("content-type", "")):
        return parse_body(model, raw)
    raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
                                  if not raw else
                                  {"type": "model_attributes_type", "loc": ("body",), "input": raw,
                                   "msg": "Input should be a valid dictionary or object to extract fields from"}])


def _says_json(content_type: str) -> bool:
    maintype, _, subtype = content_type.partition(";")[0].strip().lower().partition("/")
    return maintype == "application" and (subtype == "json" or subtype.endswith("+json"))


def json_response(content: Any) -> Response:
    return _JsonResponse(orjson.dumps(content))


class _JsonResponse(Response):
    """A 200 with a JSON body and the two headers it needs, set directly: ``Response.__init__`` renders the
    content and derives them through a general path that cost as much as encoding the answer."""

    media_type = "application/json"

    def __init__(self, body: bytes) -> None:
        self.status_code, self.body, self.background = 200, body, None
        self.raw_headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]


class FastLane:
    """The requests of API clients (``Authorization: Bearer`` and no cookie) to the exact path and method of a
    ``DirectRoute`` handler (``add``), served before the app's middleware stack and router.

    Why: under the trainer's metrics webhook load, the layers every request passes (FastAPI's telemetry check,
    the error, body-limit, security-header, CSRF and exception middlewares, the router trying ~30 routers, the
    request/response wrappers) cost the event loop about as much as the webhook's own work did
    (docs/benchmarks.md "Webhook ingest: what moved the numbers (issue 19)").

    What still applies, in the same order: every middleware the app installed with ``add_middleware`` (the body
    limit, the security headers) except those that declare ``passes_api_clients`` (they do nothing for such a
    request: CSRF protection guards cookie sessions only); the app's exception handlers, looked up as Starlette
    does (by status code, then the exception's classes; ``Exception``'s handler answers the 500). A request
    with a cookie goes the whole way, so a browser session keeps its CSRF check. What does not: FastAPI's native
    telemetry (Lanner configures none) and the router's dependencies (a direct handler has none)."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._handlers: dict[tuple[str, str], Handler] = {}
        self._stack: ASGIApp | None = None

    def add(self, routes: Iterable[BaseRoute]) -> None:
        """Take the direct routes among ``routes`` whose path has no parameters."""
        for route in routes:
            handler = getattr(getattr(route, "endpoint", None), "direct_handler", None)
            if isinstance(route, DirectRoute) and handler is not None and not route.param_convertors:
                for method in route.methods:
                    self._handlers[(method, route.path)] = handler

    def match(self, scope: Scope) -> Handler | None:
        handler = self._handlers.get((scope["method"], scope["path"]))
        if handler is None or scope.get("root_path"):
            return None
        bearer = False
        for name, value in scope["headers"]:
            if name == b"cookie":
                return None
            if name == b"authorization":
                bearer = value[:7].lower() == b"bearer "
        return handler if bearer else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send, handler: Handler) -> None:
        if self._stack is None:
            self._stack = self._build()
        scope["app"] = self._app
        scope[_HANDLER] = handler
        await self._stack(scope, receive, send)

    def _build(self) -> ASGIApp:
        if getattr(self._app, "max_body_size", None) is not None:
            raise RuntimeError("the fast lane does not apply Starlette's max_body_size (lanner.http.body_limit does)")
        stack: ASGIApp = self._serve
        for cls, args, kwargs in reversed(self._app.user_middleware):
            if not getattr(cls, "passes_api_clients", False):
                stack = cls(stack, *args, **kwargs)
        return stack

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await scope[_HANDLER](request)
        except Exception as exc:  # answered by the app's handler for it, as ExceptionMiddleware would
            response = await self._handled(request, exc)
        await response(scope, receive, send)

    async def _handled(self, request: Request, exc: Exception) -> Response:
        handlers = self._app.exception_handlers
        handler = handlers.get(exc.status_code) if isinstance(exc, HTTPException) else None
        for cls in type(exc).__mro__:
            if handler is not None:
                break
            handler = handlers.get(cls)
        if handler is None:
            raise exc
        if inspect.iscoroutinefunction(handler):
            return await handler(request, exc)
        return await run_in_threadpool(handler, request, exc)


class FastAPIWithFastLane(FastAPI):
    """A FastAPI app whose ``fast_lane`` (``FastLane``) is looked at before its middleware stack; a request it
    does not take costs one dictionary lookup more."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fast_lane = FastLane(self)
        self._entry: ASGIApp = self._dispatch

    def wrap_outermost(self, wrap: Callable[[ASGIApp], ASGIApp]) -> None:
        """Put ``wrap`` in front of everything, the fast lane included: what every request must go through
        (the trusted proxies' headers, ``lanner.http.proxies``)."""
        self._entry = wrap(self._entry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._entry(scope, receive, send)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.root_path:
            handler = self.fast_lane.match(scope)
            if handler is not None:
                await self.fast_lane(scope, receive, send, handler)
                return
        await super().__call__(scope, receive, send)
