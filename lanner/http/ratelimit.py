"""Rate limits, counted by the maintained ``limits`` library (moving window) in the storage
``LANNER_RATE_LIMIT_STORAGE`` names (``LANNER_REDIS_URL``'s Redis by default when set: shared by every process).
Two kinds:

- **authentication failures**, so guessing costs the guesser, without ever refusing a valid key or session:
  - an API key is always checked (a 160-bit key is one indexed lookup, and cannot be guessed anyway); a *wrong*
    one is counted per client address, and past ``LANNER_AUTH_FAILURE_LIMIT_PER_IP`` answered 429 instead of
    401. A valid key from that same address (an office behind one NAT, next to a broken script) is served.
  - a sign-in (and a password change's current password) is counted before its password is hashed, per
    username from one address and per username from everywhere; past either, 429 without hashing. Nothing
    counted per address alone refuses a password: one account's failures never lock out another account
    behind the same address. (An address trying one password on many usernames pays a hash each time, in the
    hashing pool of two threads that no other request waits for.)
  - a web session is a random token too, always checked; nothing about it is throttled.
- **request budgets** per caller, in one bucket chosen by what the request is: a training worker's (run-scoped
  key, or the trainer's webhooks), shared inference (paths matching ``LANNER_INFERENCE_PATHS``), or the plain API.
  Dedicated endpoints (paths matching ``LANNER_ENDPOINT_PATHS``) spend none: the hosted "no rate limits".

Refusals are ``TooManyRequests`` (429 with ``Retry-After``). Who the caller is, and so which identity is
counted, is decided by ``lanner.accounts.dependencies``; this module knows no domain.

When the shared storage (Redis) cannot be reached, ``Counters`` counts in this process instead and logs a
warning, trying the storage again every ``RETRY_SECONDS``. Failing closed would turn a Redis outage into a whole
API outage (every authenticated request is counted) and refuse valid keys; failing open would lift the limits
on guessing. Counting per process keeps every limit, at most N times looser with N processes: the same as
running without Redis.

``memory://`` is ``InlineExpiryMemoryStorage``: the library's own storage starts a timer thread on a hit whenever
its last one has ended (10 ms after it started), so on a server whose requests come more than 10 ms apart (a
trainer streaming its run) every request started a thread: about 0.5 ms of CPU, and the event loop waiting
until the new thread ran (up to tens of ms on a busy machine; benchmarks/stream_replay.py).
"""

from __future__ import annotations

import logging
import math
import re
import time
from typing import Any, NoReturn

from limits import RateLimitItem, parse
from limits.errors import StorageError
from limits.storage import MemoryStorage, Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter, WindowStats

from lanner.config import Settings
from lanner.errors import TooManyRequests

API, WORKER, INFERENCE = "api", "worker", "inference"
_WHAT = {API: "API requests", WORKER: "training worker requests", INFERENCE: "inference requests"}
_FAILURES_BY_ADDRESS = "auth-ip"
_SIGN_INS_BY_USERNAME = "sign-in-user"
_SIGN_INS_BY_USERNAME_AND_ADDRESS = "sign-in-user-ip"
log = logging.getLogger(__name__)


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
    """The ``limits`` storage ``uri`` names; ``memory://`` without a timer thread per hit. A shared storage's
    errors come as ``StorageError`` and a Redis that does not answer gives up within a second, so that
    ``Counters`` can count in the process instead."""
    if uri.strip() == "memory://":
        return InlineExpiryMemoryStorage()
    options: dict[str, Any] = {"wrap_exceptions": True}
    if uri.startswith(("redis://", "rediss://", "redis+unix://")):
        options.update(socket_connect_timeout=1.0, socket_timeout=1.0)
    return storage_from_string(uri, **options)


class Counters:
    """The moving-window limiter over the configured storage, and over this process's memory while a shared
    storage cannot be reached (module docstring: why neither fail open nor fail closed)."""

    RETRY_SECONDS = 5.0

    def __init__(self, uri: str) -> None:
        self._local = MovingWindowRateLimiter(InlineExpiryMemoryStorage())
        storage = make_storage(uri)
        self._shared = None if isinstance(storage, MemoryStorage) else MovingWindowRateLimiter(storage)
        self._uri = uri.split("@")[-1]  # for the log: never a password in the URI
        self._retry_at = 0.0
        self._degraded = False

    @property
    def storage(self) -> Storage:
        return (self._shared or self._local).storage

    def _call(self, method: str, *args: Any) -> Any:
        if self._shared is not None and time.monotonic() >= self._retry_at:
            try:
                result = getattr(self._shared, method)(*args)
            except StorageError as error:
                self._retry_at = time.monotonic() + self.RETRY_SECONDS
                if not self._degraded:  # once per outage, not once per retry
                    self._degraded = True
                    log.warning("rate-limit storage %s unreachable (%s): counting in this process, retrying every "
                                "%.0f s", self._uri, error.storage_error, self.RETRY_SECONDS)
            else:
                if self._degraded:
                    self._degraded = False
                    log.warning("rate-limit storage %s reachable again: counting there", self._uri)
                return result
        return getattr(self._local, method)(*args)

    def hit(self, item: RateLimitItem, *identity: str) -> bool:
        return bool(self._call("hit", item, *identity))

    def window(self, item: RateLimitItem, *identity: str) -> WindowStats:
        return self._call("get_window_stats", item, *identity)


class RateLimits:
    def __init__(self, settings: Settings) -> None:
        self._counters = Counters(settings.resolved_rate_limit_storage)
        self._per_address = parse_limit(settings.auth_failure_limit_per_ip)
        self._per_username = parse_limit(settings.login_limit_per_username)
        self._per_username_and_address = parse_limit(settings.login_limit_per_username_and_address)
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

    @property
    def counters(self) -> Counters:
        return self._counters

    def _refuse(self, item: RateLimitItem, identity: tuple[str, ...], message: str) -> NoReturn:
        reset = self._counters.window(item, *identity).reset_time
        raise TooManyRequests(message, retry_after=math.ceil(reset - time.time()))

    def _take(self, item: RateLimitItem | None, identity: tuple[str, ...], message: str) -> None:
        if item is not None and not self._counters.hit(item, *identity):
            self._refuse(item, identity, message)

    def wrong_key(self, address: str) -> None:
        """A key from ``address`` was checked and is wrong: counted, and 429 once the address is past its budget
        (the caller answers 401 otherwise). Only wrong keys are counted, and only they are refused."""
        self._take(self._per_address, (_FAILURES_BY_ADDRESS, address),
                   "too many wrong API keys from this address (a valid key is still served)")

    def sign_in_attempt(self, address: str, username: str) -> None:
        """Counted before the password is hashed (concurrent guessers cannot all slip in while their hashes are
        computed, and one over the limit costs no hashing); a successful sign-in counts too: it is rare, a
        session lasts days. Per username from this address, then per username from everywhere."""
        name = username.lower()
        self._take(self._per_username_and_address, (_SIGN_INS_BY_USERNAME_AND_ADDRESS, name, address),
                   f"too many sign-in attempts for '{username}' from this address")
        self._take(self._per_username, (_SIGN_INS_BY_USERNAME, name), f"too many sign-in attempts for '{username}'")

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
        if item is not None and not self._counters.hit(item, kind, identity):  # the message only when refused
            self._refuse(item, (kind, identity), f"too many {_WHAT[kind]}: the limit is {item} per key")
