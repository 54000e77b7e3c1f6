"""Coded errors. Services raise these; one handler turns them into ``{"error", "code"}`` JSON."""

from __future__ import annotations


class LannerError(Exception):
    status_code = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, extra: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.extra = extra or {}


class BadRequest(LannerError):
    status_code = 400
    code = "bad_request"


class Unauthorized(LannerError):
    status_code = 401
    code = "unauthorized"


class PaymentRequired(LannerError):
    status_code = 402
    code = "insufficient_credits"


class Forbidden(LannerError):
    status_code = 403
    code = "forbidden"


class NotFound(LannerError):
    status_code = 404
    code = "not_found"


class Conflict(LannerError):
    status_code = 409
    code = "conflict"


class Unprocessable(LannerError):
    status_code = 422
    code = "invalid"


class NotImplementedOnSelfHosted(LannerError):
    status_code = 501
    code = "not_implemented"
