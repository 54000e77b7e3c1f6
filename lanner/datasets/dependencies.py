"""What dataset routes depend on beyond the request context: the import queue (built and started by
``create_app``), woken when a request queues an import."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from lanner.datasets.imports.queue import ImportQueue


async def get_import_queue(request: Request) -> ImportQueue:
    return request.app.state.imports


Imports = Annotated[ImportQueue, Depends(get_import_queue)]
