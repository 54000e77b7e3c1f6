"""Password hashing (scrypt, a memory-hard KDF from the standard library) and API key material.

A hash costs ~50 ms of CPU on purpose. The async helpers run it in a small pool of its own
(``HASH_WORKERS`` threads), so however many sign-ins arrive at once they neither block the event loop nor
take the threads every other request needs: only sign-ins wait for each other.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import secrets
from concurrent.futures import ThreadPoolExecutor

_N, _R, _P = 2**14, 8, 1
HASH_WORKERS = 2
_hashing = ThreadPoolExecutor(max_workers=HASH_WORKERS, thread_name_prefix="lanner-scrypt")


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, _N, _R, _P)
    return f"scrypt${_N}${_R}${_P}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


@functools.cache
def _stand_in_hash() -> str:
    """A hash of a random password, checked when there is no real one to check, so that an unknown username
    (or a user without a password) takes as long to refuse as a wrong password: timing does not tell them
    apart."""
    return hash_password(secrets.token_urlsafe(16))


def warm_up() -> None:
    """Make the stand-in hash at start: made on the first unknown username, it would cost that sign-in two hashes
    and tell the timing apart after all."""
    _stand_in_hash()


def verify_password(password: str, stored: str | None) -> bool:
    """True when ``password`` matches ``stored``; with no (or a foreign) stored hash it does the same work and
    answers False."""
    real = stored if stored and stored.startswith("scrypt$") else None
    _, n, r, p, salt_b64, digest_b64 = (real or _stand_in_hash()).split("$")
    digest = _scrypt(password, base64.b64decode(salt_b64), int(n), int(r), int(p))
    return hmac.compare_digest(digest, base64.b64decode(digest_b64)) and real is not None


async def verify_password_async(password: str, stored: str | None) -> bool:
    return await asyncio.get_running_loop().run_in_executor(_hashing, verify_password, password, stored)


async def hash_password_async(password: str) -> str:
    return await asyncio.get_running_loop().run_in_executor(_hashing, hash_password, password)


def new_api_key() -> str:
    """The hosted platform's format: ``ul_`` and 40 hex characters."""
    return "ul_" + secrets.token_hex(20)


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_api_key(key: str) -> bool:
    return len(key) == 43 and key.startswith("ul_") and all(c in "0123456789abcdef" for c in key[3:])
