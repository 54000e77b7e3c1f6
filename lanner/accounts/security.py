"""Password hashing (scrypt, a memory-hard KDF from the standard library) and API key material."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

_N, _R, _P = 2**14, 8, 1


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=32)
    return f"scrypt${_N}${_R}${_P}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def verify_password(password: str, stored: str | None) -> bool:
    if not stored or not stored.startswith("scrypt$"):
        return False
    _, n, r, p, salt_b64, digest_b64 = stored.split("$")
    digest = hashlib.scrypt(
        password.encode(), salt=base64.b64decode(salt_b64), n=int(n), r=int(r), p=int(p), dklen=32
    )
    return hmac.compare_digest(digest, base64.b64decode(digest_b64))


def new_api_key() -> str:
    """The hosted platform's format: ``ul_`` and 40 hex characters."""
    return "ul_" + secrets.token_hex(20)


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_api_key(key: str) -> bool:
    return len(key) == 43 and key.startswith("ul_") and all(c in "0123456789abcdef" for c in key[3:])
