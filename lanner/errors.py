"""Coded errors. Services raise these; one handler turns them into ``{"error", "code"}`` JSON."""

from __future__ import annotations


class LannerError(Exception):
    status_code = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, extra: dict | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.extra = extra or {}
        self.headers = headers or {}  # HTTP headers the answer carries (Retry-After on a 429)


# One class per HTTP status the API answers with; ``code`` is the machine-readable part of the body.
class BadRequest(LannerError):
    """400: the request names something impossible (a bad value, a missing choice); the message says which."""
    status_code, code = 400, "bad_request"


class Unauthorized(LannerError):
    status_code, code = 401, "unauthorized"


class PaymentRequired(LannerError):
    """402: the account's credit cannot cover the hold a run needs before it starts (the hosted platform's
    status for it, which the SDK shows as is)."""
    status_code, code = 402, "insufficient_credits"


class Forbidden(LannerError):
    """403: the caller is known but may not do this (a read-only share, a worker's run-scoped key)."""
    status_code, code = 403, "forbidden"


class NotFound(LannerError):
    """404: absent, or not the caller's to see: other users' private things are answered the same way, so a
    404 never confirms that something exists."""
    status_code, code = 404, "not_found"


class Conflict(LannerError):
    status_code, code = 409, "conflict"


class PayloadTooLarge(LannerError):
    """413: the body is larger than this endpoint or upload slot accepts; nothing of it was kept."""
    status_code, code = 413, "too_large"


class UnsupportedMediaType(LannerError):
    """415: the body is not the kind of content this endpoint reads (a file that is not an image)."""
    status_code, code = 415, "unsupported_media_type"


class Unprocessable(LannerError):
    """422: well-formed but not acceptable as a whole (a training event that contradicts the run, an upload
    too large for its slot)."""
    status_code, code = 422, "invalid"


class TooManyRequests(LannerError):
    """429: a rate limit is spent (too many sign-in attempts for one username, wrong keys from one address, or a
    key's request budget). ``Retry-After`` says in whole seconds when the window has room again; the SDK waits
    that long."""
    status_code, code = 429, "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        retry_after = max(1, retry_after)
        super().__init__(f"{message}: retry in {retry_after} s", extra={"retryAfter": retry_after},
                         headers={"Retry-After": str(retry_after)})


class NotImplementedOnSelfHosted(LannerError):
    """501: a hosted-platform feature a self-hosted server does not offer (README lists them)."""
    status_code, code = 501, "not_implemented"


class ServiceUnavailable(LannerError):
    """503: the service behind this route is not answering right now (a dedicated endpoint's process being
    restarted); ``Retry-After`` says when to try again."""
    status_code, code = 503, "unavailable"

    def __init__(self, message: str, *, retry_after: int = 1) -> None:
        super().__init__(message, headers={"Retry-After": str(max(1, retry_after))})
