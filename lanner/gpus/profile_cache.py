"""What profiling a model found, kept on disk between processes: each ``ModelProfile``'s numbers and the bytes
autograd saves per image at each size. Profiling needs torch and ultralytics (seconds to import, seconds to build
and trace a model on a busy machine); with these figures on disk a later process (the next ``lanner estimate``, a
restarted server) estimates without importing either.

In this process only until ``use_file`` names the file (``lanner estimate`` and ``lanner serve`` do, under
``LANNER_HOME``). The figures are pure functions of the architecture and the installed torch and ultralytics,
whose versions key the file: an upgrade starts it afresh. Losing it costs one profile; a damaged file is ignored
and rewritten."""

from __future__ import annotations

import json
import os
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

FORMAT = "lanner-model-profiles/1"  # change it when what profiling computes changes
_LOCK = threading.Lock()
_state: dict[str, Any] = {"path": None, "profiles": {}, "activations": {}}  # this process's figures


def use_file(path: Path | None) -> None:
    """Keep the figures in ``path`` too (None: in this process only, the default). What this process measured
    before is written there at once, what the file holds is read."""
    with _LOCK:
        if path == _state["path"]:
            return
        _state["path"] = path
        if path is None:
            return
        try:
            stored = json.loads(Path(path).read_text())
            if stored.get("versions") != _versions():
                stored = {}
        except (OSError, ValueError, AttributeError):
            stored = {}
        missing = False
        for section in ("profiles", "activations"):
            kept = dict(stored.get(section) or {})
            missing = missing or bool(set(_state[section]) - set(kept))
            _state[section] = {**kept, **_state[section]}
        if missing or not stored:
            _write()


def _versions() -> str:
    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "-"

    return f"{FORMAT} torch {version('torch')} ultralytics {version('ultralytics')}"


def _key(key: tuple) -> str:
    return json.dumps(list(key))


def profile_fields(key: tuple) -> dict[str, Any] | None:
    """A profile's fields (``ModelProfile`` without its key), if profiled before."""
    with _LOCK:
        return _state["profiles"].get(_key(key))


def activation_bytes(key: tuple, imgsz: int) -> int | None:
    with _LOCK:
        return _state["activations"].get(f"{_key(key)} {imgsz}")


def store_profile(key: tuple, fields: dict[str, Any]) -> None:
    _store("profiles", _key(key), fields)


def store_activation_bytes(key: tuple, imgsz: int, value: int) -> None:
    _store("activations", f"{_key(key)} {imgsz}", int(value))


def _store(section: str, name: str, value: Any) -> None:
    with _LOCK:
        if _state[section].get(name) == value:
            return
        _state[section][name] = value
        if _state["path"] is not None:
            _write()


def _write() -> None:
    """Rewrite the file atomically (a reader sees the old file or the new one); the lock is held."""
    path = Path(_state["path"])
    data = {"versions": _versions(), "profiles": _state["profiles"], "activations": _state["activations"]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        partial.write_text(json.dumps(data, sort_keys=True))
        os.replace(partial, path)
    except OSError:  # a read-only home: the figures stay in this process
        pass
