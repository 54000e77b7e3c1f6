"""How the model page words what training reports: system readings with their units (the trainer's
``SystemLogger`` keys: ``cpu`` and ``ram`` in %, ``gpus.N.temp`` in °C, ...), status-change times in UTC words
rather than ISO stamps, and one story for the weights and checkpoint cards (a run that uploaded ``last.pt`` never
reads "no checkpoint uploaded yet"; weights that came without a run's checkpoint are listed among them)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from lanner.inference import schemas as inference
from lanner.web.templating import when

# (pattern over the flattened key, label, unit); ``{0}`` is the GPU index. The first match wins.
_SYSTEM: tuple[tuple[str, str, str], ...] = (
    (r"cpu", "CPU", "%"),
    (r"ram", "RAM", "%"),
    (r"gpus\.(\d+)\.usage", "GPU {0}", "%"),
    (r"gpus\.(\d+)\.memory", "GPU {0} memory", "%"),
    (r"gpus\.(\d+)\.temp", "GPU {0} temperature", "°C"),
    (r"gpus\.(\d+)\.power", "GPU {0} power", "W"),
    (r"disk_io\.read_mbs", "Disk read", "MB/s"),
    (r"disk_io\.write_mbs", "Disk write", "MB/s"),
    (r"disk_io\.read_mb", "Disk read", "MB"),
    (r"disk_io\.write_mb", "Disk write", "MB"),
    (r"network\.recv_mbs", "Network in", "MB/s"),
    (r"network\.sent_mbs", "Network out", "MB/s"),
    (r"network\.recv_mb", "Network in", "MB"),
    (r"network\.sent_mb", "Network out", "MB"),
    (r".*_gb", "{key}", "GB"),
    (r".*_mb", "{key}", "MB"),
    (r".*_mbs", "{key}", "MB/s"),
)
_COMPILED = tuple((re.compile(pattern + r"\Z"), name, unit) for pattern, name, unit in _SYSTEM)


def _number(value: float) -> str:
    """``285``, ``35.5``, ``0.25``: whole numbers bare, then three significant digits at most."""
    if value == int(value) or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}".rstrip("0").rstrip(".")


def system_shown(system: dict[str, Any]) -> dict[str, str]:
    """``{"cpu": 35.0, "gpus.0.temp": 71}`` -> ``{"CPU": "35 %", "GPU 0 temperature": "71 °C"}``; a key the
    trainer may add that is not known here keeps its name and its bare number."""
    shown: dict[str, str] = {}
    for key, value in system.items():
        for pattern, name, unit in _COMPILED:
            match = pattern.match(key)
            if match:
                label = name.format(*match.groups(), key=key)
                shown[label] = f"{_number(float(value))} {unit}"
                break
        else:
            shown[key] = _number(float(value)) if isinstance(value, int | float) else str(value)
    return shown


def history_shown(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's status changes with ``at`` in words (``2026-12-06 14:03 UTC``) and ``iso`` kept for markup."""
    out = []
    for event in history:
        stamp = event.get("at")
        try:
            moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
        except ValueError:
            moment = None
        out.append({**event, "at": when(moment) if moment else (stamp or ""), "iso": stamp or ""})
    return out


def weights_cards(download: dict[str, Any] | None, saved: list[dict[str, Any]]) -> tuple[dict[str, Any] | None,
                                                                                          list[dict[str, Any]]]:
    """(what the Weights card shows, the Checkpoints rows). Without promoted weights, the card offers the newest
    checkpoint a run uploaded (``last.pt`` while it trains), saying it is not the model's weights yet; weights
    that no listed checkpoint is (a clone, an upload, the operator's) are added to the list."""
    if download is not None:
        card = {**download, "note": "the model's weights"}
        if not any(c["current"] for c in saved):
            saved = [{"name": download["name"], "size": download["size"], "run": None, "at": None, "current": True,
                      "url": download["url"]}, *saved]
        return card, saved
    if saved:
        newest = saved[0]
        return {"name": newest["name"], "size": newest["size"], "url": newest["url"],
                "note": "newest checkpoint; the model's weights come when training completes"}, saved
    return None, saved


def preview_size(train_args: dict[str, Any] | None) -> int:
    """The image size Preview predicts at: the one the model was trained at (a model trained on 64 px images
    sees nothing it knows at 640), else shared inference's default."""
    try:
        size = int((train_args or {}).get("imgsz") or 0)
    except (TypeError, ValueError):
        size = 0
    return size if inference.IMGSZ_MIN <= size <= inference.IMGSZ_MAX else inference.IMGSZ_DEFAULT
