"""Slugs as the trainer makes them, and collision-free variants (``train``, ``train-2``, ...)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from lanner.errors import BadRequest, Conflict


def slugify(text: str) -> str:
    """Same rule as ``ultralytics.utils.callbacks.platform.slugify`` so both sides agree on names."""
    slug = re.sub(r"[^a-z0-9\s-]", "", str(text).lower()).replace(" ", "-")
    return re.sub(r"-+", "-", slug).strip("-")[:128]


def unique_slug(base: str, taken: Iterable[str]) -> str:
    taken_set = set(taken)
    if base not in taken_set:
        return base
    n = 2
    while f"{base}-{n}" in taken_set:
        n += 1
    return f"{base}-{n}"


def renamed_slug(name: str, current: str, *, taken: Callable[[str], bool], what: str, where: str = "") -> str:
    """The slug a rename to ``name`` gives; refuses a name without letters or digits, or a slug already taken.
    Renaming changes the URL, as on the hosted platform."""
    slug = slugify(name)
    if not slug:
        raise BadRequest(f"{what} name must contain at least one letter or digit")
    if slug != current and taken(slug):
        raise Conflict(f"{what} '{where}{slug}' already exists")
    return slug
