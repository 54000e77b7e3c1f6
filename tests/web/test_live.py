"""Live pages (``lanner.web.live``): an event per change of what a service function reads, then ``end``."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from lanner.billing import service as billing
from lanner.web import live
from tests.web.pages import PASSWORD, sign_in


class FakeRequest:
    """What ``follow`` uses of a request: the app's context, and whether the browser went away."""

    def __init__(self, app: Any, *, connected_for: int = 1000) -> None:
        self.app = SimpleNamespace(state=SimpleNamespace(lanner=app.state.lanner))
        self.checks = connected_for

    async def is_disconnected(self) -> bool:
        self.checks -= 1
        return self.checks < 0


async def _collect(generator: Any) -> list[Any]:
    return [event async for event in generator]


def test_an_event_for_each_change_then_end(app):
    answers = iter([1, 1, 2, 2, 3])
    events = asyncio.run(_collect(live.follow(FakeRequest(app), lambda session: {"n": next(answers)}, event="count",
                                              interval=0, done=lambda value: value["n"] == 3)))
    assert [(e.event, e.id, e.data) for e in events] == [
        ("count", "1", '{"n": 1}'), ("count", "2", '{"n": 2}'), ("count", "3", '{"n": 3}'), ("end", "4", "{}")]


def test_the_stream_stops_when_the_browser_goes_away(app):
    calls: list[int] = []

    def read(session: Any) -> int:
        calls.append(1)
        return len(calls)

    events = asyncio.run(_collect(live.follow(FakeRequest(app, connected_for=3), read, interval=0)))
    assert len(events) == len(calls) == 3


def test_the_account_streams_its_credit(app, client, make_account):
    alice = make_account("alice", password=PASSWORD, credits_micros=5_000_000)
    sign_in(client)
    with app.state.lanner.db.session() as session:
        billing.top_up(session, user_id=alice.user_id, micros=2_500_000)
    with client.stream("GET", "/account/live") as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        lines = []
        for line in response.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert "event: balance" in lines and "id: 1" in lines
    assert json.loads(lines[-1].removeprefix("data:").strip()) == {
        "available": "$7.50", "held": "$0.00", "total": "$7.50"}
