"""The trainer's console as people read it: ANSI colour and cursor codes removed once, where console text comes in.

The real trainer colours its console (``\\x1b[34m\\x1b[1mtrain: \\x1b[0mScanning ...``) whatever its output is
connected to. Stored raw, those codes showed in the web console and hid the lines the advisor learns from
(``training.learn`` reads the dataset scan). So the text is cleaned before it is stored, and everything that reads
console rows (the API, the pages, learning) reads plain text."""

from __future__ import annotations

import re

# CSI sequences (colours, cursor moves, erase line: ESC [ params intermediates final), OSC sequences (titles,
# hyperlinks: ESC ] ... BEL or ESC \), character set choices (ESC ( B) and the two-byte escapes (ESC and one of @-_).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[@-_]")


def plain(text: str) -> str:
    """``text`` without ANSI escape sequences; everything else (carriage returns included) is kept."""
    return _ANSI.sub("", text) if "\x1b" in text else text
