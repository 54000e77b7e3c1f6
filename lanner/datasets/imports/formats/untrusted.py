"""Parsing uploaded text with a cost bounded by its size.

YAML aliases let a 1.5 KB ``data.yaml`` expand into billions of nodes ("billion laughs": nine levels of nine
aliases); a dataset YAML never needs them, so the loader refuses any alias before it builds anything, and caps
nesting. Without aliases a document's size bounds its structure. JSON has no aliases; Python's parser stops
deep nesting with RecursionError, which callers turn into ImportRefused.
"""

from __future__ import annotations

from typing import Any

import yaml

from lanner.datasets.records import ImportRefused

MAX_DEPTH = 64
MAX_CLASSES = 100_000     # ImageNet-21k has 21,841; an ``nc: 10**12`` must not build a list of names
MAX_CLASS_NAME = 256


class _NoAliasLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases and deep nesting while composing, before any node is built."""

    def __init__(self, stream: str, name: str) -> None:
        super().__init__(stream)
        self._name = name
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ImportRefused(f"{self._name} uses a YAML alias (*{event.anchor}, line {event.start_mark.line + 1});"
                                " aliases are not allowed in uploaded files: write the value out")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ImportRefused(f"{self._name} is nested more than {MAX_DEPTH} levels deep")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_yaml(text: str, name: str) -> Any:
    """Parse an uploaded YAML document; ImportRefused for aliases or excessive nesting, yaml.YAMLError for
    broken YAML."""
    loader = _NoAliasLoader(text, name)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def check_class_count(count: int, name: str) -> None:
    if count > MAX_CLASSES:
        raise ImportRefused(f"{name} declares {count} classes; at most {MAX_CLASSES} are supported")
