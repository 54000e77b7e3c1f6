"""Credentials at rest: Fernet (AES-128-CBC + HMAC-SHA256) under ``LANNER_SECRETS_KEY``, a key the operator
holds outside the database, so a copy of the database alone holds no usable credential. Several keys
(comma-separated) rotate: the first encrypts, any decrypts."""

from __future__ import annotations

import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from lanner.config import Settings
from lanner.errors import ServiceUnavailable


class SecretsUnavailable(ServiceUnavailable):
    code = "secrets_key_missing"


def _fernet(settings: Settings) -> MultiFernet:
    keys = [key.strip() for key in (settings.secrets_key or "").split(",") if key.strip()]
    if not keys:
        raise SecretsUnavailable("storage integrations need LANNER_SECRETS_KEY set by the operator")
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as exc:
        raise SecretsUnavailable("LANNER_SECRETS_KEY is not a Fernet key (32 url-safe base64 bytes)") from exc


def seal(settings: Settings, credentials: dict[str, Any]) -> str:
    return _fernet(settings).encrypt(json.dumps(credentials).encode()).decode()


def unseal(settings: Settings, token: str) -> dict[str, Any]:
    try:
        return json.loads(_fernet(settings).decrypt(token.encode()))
    except InvalidToken as exc:
        raise SecretsUnavailable("stored credentials cannot be decrypted with LANNER_SECRETS_KEY (was the key "
                                 "changed without keeping the old one after it?)") from exc
