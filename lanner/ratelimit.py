"""Rate limits, counted by the maintained ``limits`` library (moving window) in the storage
``LANNER_RATE_LIMIT_STORAGE`` names. Two kinds:

- **authentication failures**, so guessing costs the guesser: per client address (failed sign-ins and wrong API
  keys together) and per username (sign-in attempts). Once an address or a username has spent its allowance,
  even the right password or a valid key is refused until the window passes; otherwise a guesser could keep
  guessing and simply stop when it is let in.
- **request budgets** per caller, in one bucket chosen by what the request is: a training worker's (run-scoped
  key, or the trainer's webhooks), shared inference (paths matching ``LANNER_INFERENCE_PATHS``), or the plain API.
  Dedicated endpoints (paths matching ``LANNER_ENDPOINT_PATHS``) spend none: the hosted "no rate limits".

Refusals are ``TooManyRequests`` (429 with ``Retry-After``). Who the caller is, and so which identity is
counted, is decided by ``lanner.accounts.dependencies``; this module knows no domain.
"""

from __future__ import annotations

import math
import re
import time
from typing import NoReturn

from limits import RateLimitItem, parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from lanner.config import Settings
from lanner.errors import TooManyRequests

API, WORKER, INFERENCE = "api", "worker", "inference"
_WHAT = {API: "API requests", WORKER: "training worker requests", INFERENCE: "inference requests"}
_FAILURES_BY_ADDRESS = "auth-ip"
_SIGN_INS_BY_USERNAME = "sign-in-user"


def parse_limit(text: str | None) -> RateLimitItem | None:
    """``"100/minute"`` as a ``limits`` item; ``""``, ``"0"`` or a zero amount mean no limit. A malformed string
    raises ValueError (``RateLimits`` is built at start-up, so a typo stops the server instead of opening it)."""
    text = (text or "").strip()
    if text in ("", "0"):
        return None
    item = parse(text)
    return item if item.amount > 0 else None


class RateLimits:
    def __init__(self, settings: Settings) -> None:
        self._limiter = MovingWindowRateLimiter(storage_from_string(settings.rate_limit_storage))
        self._per_address = parse_limit(settings.auth_failure_limit_per_ip)
        self._per_username = parse_limit(settings.login_limit_per_username)
        self._budgets = {API: parse_limit(settings.api_rate_limit), WORKER: parse_limit(settings.worker_rate_limit),
                         INFERENCE: parse_limit(settings.inference_rate_limit)}
        try:
            self._inference_paths = re.compile(settings.inference_paths) if settings.inference_paths.strip() else None
        except re.error as error:  # a typo stops the server at start, like a malformed limit
            raise ValueError(f"LANNER_INFERENCE_PATHS is not a regular expression: {error}") from None
        try:
            self._unlimited_paths = re.compile(settings.endpoint_paths) if settings.endpoint_paths.strip() else None
        except re.error as error:
            raise ValueError(f"LANNER_ENDPOINT_PATHS is not a regular expression: {error}") from None

    def _refuse(self, item: RateLimitItem, kind: str, identity: str, message: str) -> NoReturn:
        reset = self._limiter.get_window_stats(item, kind, identity).reset_time
        raise TooManyRequests(message, retry_after=math.ceil(reset - time.time()))

    def _take(self, item: RateLimitItem | None, kind: str, identity: str, message: str) -> None:
        if item is not None and not self._limiter.hit(item, kind, identity):
            self._refuse(item, kind, identity, message)

    def refuse_failing_address(self, address: str) -> None:
        """Before an API key is looked at: 429 when ``address`` has no failures left, valid key or not."""
        item = self._per_address
        if item is not None and not self._limiter.test(item, _FAILURES_BY_ADDRESS, address):
            self._refuse(item, _FAILURES_BY_ADDRESS, address, "too many failed sign-ins or wrong API keys from "
                         "this address")

    def count_failure(self, address: str) -> None:
        """A wrong API key from ``address``."""
        if self._per_address is not None:
            self._limiter.hit(self._per_address, _FAILURES_BY_ADDRESS, address)

    def count_sign_in(self, address: str, username: str) -> None:
        """Every sign-in attempt counts as a failure, and is counted before its password is hashed: concurrent
        guessers cannot all slip in while their hashes are computed, and one over the limit costs no hashing.
        A successful sign-in counts too (it is rare: a session lasts days)."""
        self._take(self._per_address, _FAILURES_BY_ADDRESS, address,
                   "too many failed sign-ins or wrong API keys from this address")
        self._take(self._per_username, _SIGN_INS_BY_USERNAME, username.lower(),
                   f"too many sign-in attempts for '{username}'")

    def bucket(self, path: str, *, worker: bool) -> str:
        """Which budget a request spends: a training worker's, shared inference's or the API's."""
        if worker:
            return WORKER
        if self._inference_paths is not None and self._inference_paths.match(path):
            return INFERENCE
        return API

    def count_request(self, identity: str, path: str, *, worker: bool) -> None:
        """One request by ``identity`` (a key, or a user for a web session); 429 once its budget is spent."""
        if not worker and self._unlimited_paths is not None and self._unlimited_paths.match(path):
            return
        kind = self.bucket(path, worker=worker)
        item = self._budgets[kind]
        if item is not None:
            self._take(item, kind, identity, f"too many {_WHAT[kind]}: the limit is {item} per key")
