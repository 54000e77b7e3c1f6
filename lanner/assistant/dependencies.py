"""What the assistant's routes and pages depend on: the loop that starts its rounds (built by ``create_app``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from lanner.assistant.loop import AssistantLoop


async def get_loop(request: Request) -> AssistantLoop:
    """Set by ``create_app``; async: no I/O."""
    return request.app.state.assistant


Loop = Annotated[AssistantLoop, Depends(get_loop)]
