"""Bounded input types: every number and free-form JSON value a request carries, typed by what stores it.

Why: an integer past a column's range reaches the database driver, which raises (SQLite: ``OverflowError``;
PostgreSQL: ``integer out of range``) and the request answers 500. A float may be NaN or infinite, which JSON
cannot carry back out. A free-form object (``metadata``) is stored and served on every read, so its size is
everyone's problem. Typing each field here turns all of these into a 422 that names the field, before any
service runs. Ground floor: it knows no domain.

Which integer type: a column declared ``Integer`` is 32-bit on PostgreSQL (ids, version numbers, epochs, class
ids, line counts), ``BigInteger`` and SQLite's INTEGER are 64-bit (byte sizes, offsets, the trainer's
millisecond-based console chunk ids).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import orjson
from pydantic import AfterValidator, Field

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# A free-form JSON field stored and served back (metadata, trainArgs): its size serialized, at most.
JSON_FIELD_MAX_BYTES = 64 * 1024
TEXT_MAX_CHARS = 5000  # descriptions, as the create requests already allow

# How many, or which one, where 0 means something: epochs, class ids, line counts, page numbers, version 0 (the
# current content). Stored in 32-bit columns.
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
# A row's id or number, counted from 1: run ids, dataset version numbers, page numbers.
RowId = Annotated[int, Field(ge=1, le=INT32_MAX)]
# A count or position that may pass 2^31: byte sizes, list offsets, console chunk ids, seeds.
BigCount = Annotated[int, Field(ge=0, le=INT64_MAX)]
# How many rows one page of a listing returns (a route may lower the cap: ``Annotated[PageSize, Query(le=100)]``).
PageSize = Annotated[int, Field(ge=1, le=1000)]
# Any float a column or a JSON response can carry: NaN and infinities are refused.
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


def _cursor(value: str) -> str:
    if not value.isdigit() or int(value) > INT64_MAX:
        raise ValueError("must be the nextCursor of an earlier page")
    return value


# A page cursor as this server hands them out (``nextCursor``: a row position as decimal digits).
Cursor = Annotated[str, AfterValidator(_cursor)]


def _contains_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_contains_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_non_finite(v) for v in value)
    return False


def storable_json(value: Any, *, max_bytes: int | None = JSON_FIELD_MAX_BYTES, finite: bool = True) -> Any:
    """``value`` if the database's JSON serializer (orjson, ``lanner.db``) can write it, it fits in
    ``max_bytes`` and (``finite``) holds no NaN or infinity; raises ValueError saying why not. orjson refuses
    integers past 64 bits and nesting deeper than 255 levels, both of which the standard JSON parser lets into
    a request; it is asked first, so the walks here never recurse deeper than that."""
    size = len(_dumped(value))
    if finite and _contains_non_finite(value):
        raise ValueError("must not contain NaN or Infinity")
    if max_bytes is not None and size > max_bytes:
        raise ValueError(f"is {size} bytes as JSON; at most {max_bytes} are kept")
    return value


def stored_json_copy(value: Any) -> Any:
    """``value`` as the database's JSON serializer (orjson, ``lanner.db``) stores it, every NaN and infinity
    null (what the trainer does before it sends); raises ValueError as ``storable_json`` does when it cannot be
    stored. One round trip through orjson, which writes non-finite floats as null: for a value parsed from JSON
    it changes nothing else. Why not a walk that copies only where a number is not finite: on a trainer's
    epoch (~40 values) the Python walk cost twice the round trip (docs/benchmarks.md, issue 19)."""
    return orjson.loads(_dumped(value))


def _dumped(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        raise ValueError("cannot be stored: integers must fit in 64 bits, nesting in 255 levels, and text must "
                         "be valid Unicode") from None


# Marks a value stored as JSON and served back: storable, and at most ``JSON_FIELD_MAX_BYTES`` serialized
# (``Annotated[list[str], StoredJson]`` for tags and class names).
StoredJson = AfterValidator(storable_json)
# A free-form object stored and served back (``metadata``, ``trainArgs``).
JsonObject = Annotated[dict[str, Any], StoredJson]
