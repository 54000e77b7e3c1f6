"""The price of device time, in one place: what the meter charges a running run and what an estimate says a
run will cost follow the same rule, so an estimate is priced exactly as the run will be billed.

The rule: per-second billing, a started second counts whole, and the integer micro-dollar amount is rounded up.
A run on several devices is billed as that many one-device runs of the same seconds: n GPUs cost exactly n times
one, to the micro-dollar.
A run is billed for the seconds of its finished attempts plus the running one (time a lost worker spent after
its last sign of life is refunded by the supervisor, not counted here)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Protocol

from lanner.billing.service import dollars_to_micros
from lanner.db import utcnow

SECONDS_PER_HOUR = 3600


class Metered(Protocol):
    """What the meter reads of a run (``lanner.training.models.Run`` has these columns)."""

    billed_seconds: float | None
    attempt_started_at: datetime | None


def charge_for(seconds: float, price_micros_per_hour: int, devices: int = 1) -> int:
    """What ``seconds`` of ``devices`` devices cost at ``price_micros_per_hour`` for them all, in micro-dollars:
    each device's share (the price divided by ``devices``, which a run's price always is a multiple of) billed
    as one device would be."""
    billed, devices = math.ceil(max(0.0, seconds)), max(1, devices)
    return devices * -(-billed * (price_micros_per_hour // devices) // SECONDS_PER_HOUR)


def cost_micros(seconds: float, price_per_hour: float, devices: int = 1) -> int:
    """``charge_for`` at one device's price in dollars per hour (the catalogue's unit): the estimator's price
    rule."""
    return devices * charge_for(seconds, dollars_to_micros(price_per_hour))


def elapsed_seconds(start: datetime | None, end: datetime | None) -> float:
    """Seconds from ``start`` to ``end``; 0 when either is unknown or the clock ran backwards."""
    if start is None or end is None:
        return 0.0
    return max(0.0, (end - start).total_seconds())


def billing_seconds(run: Metered, now: datetime | None = None) -> float:
    """Seconds charged so far: finished attempts plus the running one."""
    running = elapsed_seconds(run.attempt_started_at, now or utcnow()) if run.attempt_started_at else 0.0
    return (run.billed_seconds or 0.0) + running
