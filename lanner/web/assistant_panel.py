"""The dataset page's "Assistant" section, read one way: its settings form (strings as typed, so a refused form
shows them again, each bad field with its message), and what the section shows, made from the view the
assistant API answers (``assistant.service.view``), so the page shows exactly what ``GET .../assistant`` does.

Only the dataset's owner sees the section (the assistant spends the owner's credit); its form offers the GPU
types the train dialog lets the owner pick (``cpu`` among them)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lanner.assistant import service as assistant_service
from lanner.assistant.schemas import MAX_EPOCHS, MAX_IMGSZ, MAX_LABELS, MIN_IMGSZ, AssistantUpdate
from lanner.datasets.models import Dataset
from lanner.gpus.catalogue import Catalogue
from lanner.training.capacity import availability, runnable_types
from lanner.web.train_form import integer

STATUS_LABELS = {"off": "Off", "waiting": "Waiting for labels", "starting": "Starting", "training": "Training",
                 "ready": "Ready", "failed": "Failed"}
BADGES = {"off": "off", "waiting": "pending", "starting": "pending", "training": "running", "ready": "ready",
          "failed": "failed"}
# How often an open dataset page asks for the assistant's state (htmx ``every``): often while a round trains,
# seldom while it waits for labels made elsewhere (the editor), never when it is off.
POLL_SECONDS = {"starting": 5, "training": 5, "waiting": 15, "ready": 15, "failed": 15}
# field -> (label, lowest, highest)
BOUNDS = {"min_labels": ("minimum labels", 1, MAX_LABELS), "every": ("retrain every", 1, MAX_LABELS),
          "epochs": ("epochs", 1, MAX_EPOCHS), "imgsz": ("image size", MIN_IMGSZ, MAX_IMGSZ)}


@dataclass
class AssistantForm:
    enabled: bool = False
    gpu: str = "cpu"
    min_labels: str = ""
    every: str = ""
    epochs: str = ""
    imgsz: str = ""

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> AssistantForm:
        values = {name: str(data.get(name, "")).strip()[:64] for name in ("gpu", *BOUNDS)}
        return cls(enabled=str(data.get("enabled", "")).lower() in ("1", "on", "true", "yes"), **values)

    @classmethod
    def of(cls, view: Mapping[str, Any]) -> AssistantForm:
        """The saved settings, as the form shows them."""
        return cls(enabled=view["enabled"], gpu=view["gpuType"], min_labels=str(view["minLabels"]),
                   every=str(view["every"]), epochs=str(view["epochs"]), imgsz=str(view["imgsz"]))

    def update(self, offered: list[dict[str, Any]], errors: dict[str, str]) -> AssistantUpdate | None:
        """The API's body for this form, or None with ``errors`` (field -> message) filled in."""
        numbers = {name: integer(getattr(self, name), name, errors, low, high)
                   for name, (_, low, high) in BOUNDS.items()}
        if self.gpu not in {o["id"] for o in offered}:
            errors["gpu"] = "Pick one of the GPU types listed."
        if errors:
            return None
        return AssistantUpdate(enabled=self.enabled, gpuType=self.gpu, minLabels=numbers["min_labels"],
                               every=numbers["every"], epochs=numbers["epochs"], imgsz=numbers["imgsz"])


def runnable(session: Any, runtime: Any, catalogue: Catalogue) -> set[str]:
    """The GPU types a round can run on here: the train dialog's rule (``capacity.runnable_types``)."""
    return runnable_types(runtime.executor, availability(session, runtime.executor, catalogue))


def offered(catalogue: Catalogue, tier: str, current: str, runnable: set[str]) -> list[dict[str, Any]]:
    """The GPU types the owner may train on and this server can run, as the train dialog offers them; the saved
    one stays listed, saying why it would not run."""
    rows = [{"id": g.id, "name": g.display_name, "price": g.price_per_hour} for g in catalogue.allowed_for(tier)
            if g.id in runnable]
    if current not in {r["id"] for r in rows} and current in catalogue:
        gpu = catalogue.get(current)
        why = "not available here" if gpu.allowed_for(tier) else "not available to your plan"
        rows.append({"id": gpu.id, "name": f"{gpu.display_name} ({why})", "price": gpu.price_per_hour})
    return rows


def signature(view: Mapping[str, Any]) -> str:
    """A digest of what the chart and the rounds table show: a poll sends back the one it has, and gets them again
    only when they changed (redrawing the chart every few seconds would flicker)."""
    shown = [(r["round"], r["status"], r["mAP50"], r["shown"], r["acceptedUnchanged"], r["modelRef"], r["reason"],
              r["completedAt"]) for r in view["rounds"]]
    return hashlib.blake2b(repr(shown).encode(), digest_size=8).hexdigest()


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _share(accepted: int, shown: int) -> float | None:
    return accepted / shown if shown else None


def panel(session: Session, dataset: Dataset, *, catalogue: Catalogue, tier: str, runnable: set[str],
          form: AssistantForm | None = None, errors: dict[str, str] | None = None,
          notice: dict[str, str] | None = None) -> dict[str, Any]:
    """The section's template context (``assistant``)."""
    view = assistant_service.view(session, dataset, assistant_service.find(session, dataset))
    rounds = [{**r, "started": _time(r["startedAt"]), "completed": _time(r["completedAt"]),
               "share": _share(r["acceptedUnchanged"], r["shown"]),
               "url": f"/{r['modelRef']}" if r["modelRef"] else None} for r in view["rounds"]]
    last = rounds[-1] if rounds else None
    chart = {"rounds": [r["round"] for r in rounds], "map50": [r["mAP50"] for r in rounds],
             "accepted": [r["share"] for r in rounds]}
    return {
        "dataset_name": dataset.name, "poll_seconds": POLL_SECONDS.get(view["status"]) if view["enabled"] else None,
        "signature": signature(view),
        "view": view, "status_label": STATUS_LABELS[view["status"]], "badge": BADGES[view["status"]],
        "waiting_for": max(0, view["nextRoundAt"] - view["labelled"]) if view["nextRoundAt"] is not None else 0,
        "last": last, "rounds": rounds,
        "chart": chart if any(v is not None for v in chart["map50"] + chart["accepted"]) else None,
        "form": form or AssistantForm.of(view), "errors": errors or {}, "notice": notice,
        "gpus": offered(catalogue, tier, view["gpuType"], runnable), "bounds": BOUNDS,
        "model_url": f"/{view['model']['ref']}" if view["model"] and view["model"]["ref"] else None,
    }
