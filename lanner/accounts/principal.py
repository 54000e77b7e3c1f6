"""Who is calling. Its own module because nearly every service takes a principal and needs nothing else of
accounts: importing it does not bring in the user and key functions of ``accounts.service``."""

from __future__ import annotations

from dataclasses import dataclass

from lanner.accounts.models import User


@dataclass(frozen=True)
class Principal:
    """Who is calling: cached per API key so the hot webhook path skips a lookup."""

    user_id: str
    username: str
    tier: str
    key_id: str | None
    run_id: int | None = None  # set for a run-scoped worker key
    is_admin: bool = False  # the server's admin (``lanner users create --admin``): the operator's pages and API

    @classmethod
    def of(cls, user: User, *, key_id: str | None = None, run_id: int | None = None) -> Principal:
        """The one way to act as ``user`` (a key's owner, a cookie's user, the CLI acting for someone)."""
        return cls(user_id=user.id, username=user.username, tier=user.tier, key_id=key_id, run_id=run_id,
                   is_admin=bool(user.is_admin))

    @classmethod
    def operator(cls) -> Principal:
        """The server's operator at the command line: no user, no tier limit, no private data."""
        return cls(user_id="", username="", tier="enterprise", key_id=None)
