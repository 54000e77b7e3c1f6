"""The endpoint engine of one server process: the supervisor that runs deployments' processes, the request log
writer, the route cache and the forwarder. ``create_app`` builds it and ties it to the app's lifespan; routes
reach it through ``Endpoints``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from lanner.context import AppContext
from lanner.deployments.backends import port_range
from lanner.deployments.proxy import Forwarder, Routes
from lanner.deployments.service import offered_regions
from lanner.deployments.supervisor import Supervisor
from lanner.deployments.telemetry import RequestLog


class DeploymentRuntime:
    def __init__(self, ctx: AppContext, backends: dict[str, Any] | None = None) -> None:
        regions = offered_regions(ctx.settings)  # a bad LANNER_DEPLOY_REGIONS stops the server at start
        if "ray" in regions.values() and not ctx.settings.ray_address:
            raise ValueError("LANNER_DEPLOY_REGIONS sends endpoints to Ray: set LANNER_RAY_ADDRESS (the dashboard)")
        port_range(ctx.settings.endpoint_ports)
        self.ctx = ctx
        self.routes = Routes(ctx.db)
        self.forwarder = Forwarder()
        self.requests = RequestLog(ctx.db)
        self.supervisor = Supervisor(ctx, backends, on_change=self.routes.forget)

    def changed(self) -> None:
        """A request changed a deployment (called once it committed)."""
        self.routes.forget()
        self.supervisor.wake()

    def start(self) -> None:
        self.requests.start()
        self.supervisor.start()

    def stop(self) -> None:
        self.supervisor.stop()
        self.requests.stop()


async def get_runtime(request: Request) -> DeploymentRuntime:
    """Set by ``create_app``; async: no I/O."""
    return request.app.state.deployments


Endpoints = Annotated[DeploymentRuntime, Depends(get_runtime)]
