"""Endpoint time into the ledger, per second, by the rule training is billed with (``billing.metering``: a
started second counts, micro-dollars rounded up), at the deployment's price per instance-hour (``cpu`` x
``LANNER_ENDPOINT_PRICE_PER_VCPU_HOUR`` + ``memoryGi`` x ``LANNER_ENDPOINT_PRICE_PER_GIB_HOUR``; 0 by default).

The clock runs from a launch to the stop, failure or deletion (a restart after a crash included), times the
instances running (one local process; Ray Serve's running replicas); a stopped endpoint costs nothing. Each
``meter`` adds the time since ``billing_since`` to ``billed_seconds`` and brings the ledger up to it: the
charge is cumulative and keyed by its interval, so a repeated pass charges nothing twice. When the credit runs
out the endpoint is stopped, with that reason."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from lanner.billing import service as billing
from lanner.billing.metering import charge_for, elapsed_seconds
from lanner.db import utcnow
from lanner.deployments import state
from lanner.deployments.models import Deployment

log = logging.getLogger("lanner.deployments")
KIND = "endpoint"  # the ledger kind (the SDK's transaction type "deployment")


def start_clock(deployment: Deployment, instances: int = 1) -> None:
    if deployment.billing_since is None:
        deployment.billing_since = utcnow()
    deployment.instances = max(1, instances)


def meter(session: Session, deployment: Deployment, *, stop_clock: bool = False) -> None:
    """Bill the time since the last meter (and stop the clock: the process is gone)."""
    now = utcnow()
    if deployment.billing_since is not None:
        deployment.billed_seconds += elapsed_seconds(deployment.billing_since, now) * max(1, deployment.instances)
        deployment.billing_since = None if stop_clock else now
    if stop_clock:
        deployment.instances = 0
    target = charge_for(deployment.billed_seconds, deployment.price_micros_per_hour)
    if target <= deployment.charged_micros:
        return
    charged, shortfall = billing.charge_usage_to(
        session, user_id=deployment.owner_id, reference=f"endpoint:{deployment.id}",
        charged_micros=deployment.charged_micros, target_micros=target, kind=KIND, model_id=deployment.model_id,
        description=f"Endpoint {deployment.name} ({deployment.cpu} vCPU, {deployment.memory_gi} GiB)")
    deployment.charged_micros += charged
    if shortfall > 0 and deployment.status in state.RUNNING:
        log.warning("deployment %s stopped: its owner's credit ran out", deployment.id)
        state.transition(session, deployment, state.STOPPING, reason="stopped: the account's credit ran out",
                         severity="WARNING")
