"""Live pages: Server-Sent Events (``sse-starlette``) that follow what a service function reads.

A page route returns ``stream(request, read, ...)``. ``read(session)`` is called every ``interval`` seconds
in the threadpool, each time in a short transaction of its own; an event goes out only when its answer
changed (the first answer always: the page may be older than the stream). JSON data, a numbered ``id``, the
``event`` name the page listens for; a comment line every ``ping`` seconds keeps proxies from closing an idle
stream. When ``done(value)`` says so, a last ``end`` event tells the browser not to reconnect. The stream stops
when the browser goes away.

In the page: ``<div data-live-src="/url" data-live-event="name">`` with ``data-live-field="key"`` children,
which ``static/live.js`` fills from each event's keys; it also fires ``lanner:live`` on that element with the
data, for page scripts (a chart calls ``uPlot.setData``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from sqlalchemy.orm import Session
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from lanner.context import AppContext

END_EVENT = "end"


def _read(ctx: AppContext, read: Callable[[Session], Any]) -> Any:
    with ctx.db.session() as session:
        return read(session)


async def follow(request: Request, read: Callable[[Session], Any], *, event: str = "update",
                 interval: float = 2.0, done: Callable[[Any], bool] | None = None) -> AsyncIterator[ServerSentEvent]:
    """The events of ``stream``: one per change of ``read``'s answer (which must be JSON-serialisable)."""
    ctx: AppContext = request.app.state.lanner
    last: str | None = None
    number = 0
    while not await request.is_disconnected():
        value = await run_in_threadpool(_read, ctx, read)
        data = json.dumps(value, sort_keys=True, default=str)
        if data != last:
            number += 1
            last = data
            yield ServerSentEvent(data=data, event=event, id=str(number))
        if done is not None and done(value):
            yield ServerSentEvent(data="{}", event=END_EVENT, id=str(number + 1))
            return
        await asyncio.sleep(interval)


def stream(request: Request, read: Callable[[Session], Any], *, event: str = "update", interval: float = 2.0,
           ping: int = 15, done: Callable[[Any], bool] | None = None) -> EventSourceResponse:
    """An ``text/event-stream`` response following ``read`` (see the module's docstring)."""
    return EventSourceResponse(follow(request, read, event=event, interval=interval, done=done), ping=ping)
