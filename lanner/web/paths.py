"""Path pieces the page modules share: ``{owner:owner}`` matches only a name a user can have (never a reserved
word), so ``/{owner}/...`` pages never shadow ``/datasets``, ``/account``, ``/api`` or any other page."""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

from lanner.accounts.service import RESERVED


class OwnerConvertor(Convertor[str]):
    """A username: never a reserved word, so ``/datasets/x`` or ``/api/y`` are not someone's project."""

    regex = "(?!(?:" + "|".join(sorted(RESERVED)) + ")(?:/|$))[a-z0-9][a-z0-9-]{0,39}"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("owner", OwnerConvertor())
