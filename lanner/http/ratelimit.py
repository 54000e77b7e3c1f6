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

``memory://`` is ``InlineExpiryMemoryStorage``: the library's own storage starts a timer thread on a hit whenever
its last one has ended (10 ms after it started), so on a server whose requests come more than 10 ms apart (a
trainer streaming its run) every request started a thread: about 0.5 ms of CPU, and the event loop waiting
until the new thread ran (up to tens of ms on a busy machine; benchmarks/stream_replay.py).
"""

from __future__ import annotations

import math
import re
import time
from typing import NoReturn

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage, Storage, storage_from_string
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


class InlineExpiryMemoryStorage(MemoryStorage):
    """``limits``' memory storage, its expired entries dropped by the request that finds the last sweep a second
    old instead of by a timer thread started for the purpose. Only memory is at stake: the moving window, the
    fixed window and the sliding window each compare timestamps on every check, so an entry not yet swept never
    counts once it expired. (Overrides the storage's name-mangled ``__schedule_expiry``; a test fails if the
    library renames it.)"""

    SWEEP_SECONDS = 1.0

    def __init__(self, uri: str | None = None, **options: str) -> None:
        super().__init__(uri, **options)  # starts the library's first timer once; it ends after one sweep
        self._next_sweep = 0.0

    def _MemoryStorage__schedule_expiry(self) -> None:  # noqa: N802 (the library's name, mangled)
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + self.SWEEP_SECONDS
            self._MemoryStorage__expire_events()  # type: ignore[attr-defined]


def make_storage(uri: str) -> Storage:
    """The ``limits`` storage ``uri`` names; ``memory://`` without a timer thread per hit."""
    if uri.strip() == "memory://":
        return InlineExpiryMemoryStorage()
    return storage_from_string(uri)


class RateLimits:
    def __init__(self, settings: Settings) -> None:
        self._limiter = MovingWindowRateLimiter(make_storage(settings.rate_limit_storage))
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
