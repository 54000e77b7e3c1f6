"""Check a response against the SDK's own declared response type (``ultralytics_platform.types``)."""

from __future__ import annotations

from typing import Any

from typeguard import CollectionCheckStrategy, check_type
from ultralytics_platform import types as sdk_types


def assert_sdk_type(value: Any, type_name: str) -> Any:
    """Raise if ``value`` does not match ``type_name`` exactly (all list items checked, not just the first)."""
    return check_type(value, getattr(sdk_types, type_name), collection_check_strategy=CollectionCheckStrategy.ALL_ITEMS)
