"""The train dialog's form, read one way: its fields (strings as typed, so a refused form shows them again), the
trainer arguments and advisor constraints they make, which field a service's error is about, and the advisor's
estimates arranged as the page shows them (re-ranked by deadline and budget, the chart)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlencode

from lanner.gpus.estimator import duration_text
from lanner.training.schemas import MAX_GPU_COUNT

SIZES = ("n", "s", "m", "l", "x")
OFFICIAL_MODELS = tuple(f"yolo11{s}.yaml" for s in SIZES) + tuple(f"yolov8{s}.yaml" for s in SIZES)
CHECKBOXES = ("quick", "capture", "fallback")
# Where a service's message (which names its field first) is shown on the form.
FIELD_OF = (("gpuType", "gpu"), ("gpuCount", "gpus"), ("trainArgs.batch", "batch"), ("trainArgs.data", "dataset"),
            ("dataset", "dataset"), ("trainArgs.model", "model"), ("model:", "model"), ("model '", "model"),
            ("trainArgs.epochs", "epochs"), ("trainArgs.imgsz", "imgsz"), ("trainArgs.patience", "patience"),
            ("trainArgs.fraction", "quick_fraction"), ("insufficient credits", "credit"), ("project", "project"))


@dataclass
class TrainForm:
    dataset: str = ""
    dataset_uri: str = ""
    model: str = ""  # none named: the best pretrained start (train_pages.prefill), else random weights
    epochs: str = "100"
    imgsz: str = "640"
    batch: str = "16"
    patience: str = "100"
    project: str = ""
    name: str = ""
    gpu: str = ""
    gpus: str = "1"  # GPUs of the chosen type on one node
    deadline: str = ""  # hours
    budget: str = ""  # dollars: re-ranks the table
    max_cost: str = ""  # dollars: the run is cancelled when it has cost this
    quick: bool = False
    quick_fraction: str = "0.1"
    quick_epochs: str = "3"
    capture: bool = False
    fallback: bool = False  # no node of the type within its pool's start timeout: use the next the hold covers
    advised: str = ""  # the GPU type the dialog pre-selected last time: still checked means "follow the advice"

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> TrainForm:
        values: dict[str, Any] = {}
        for item in fields(cls):
            if item.name in CHECKBOXES:
                values[item.name] = str(data.get(item.name, "")).lower() in ("1", "on", "true", "yes")
            elif item.name in data:
                values[item.name] = str(data[item.name]).strip()[:300]
        return cls(**values)

    @property
    def dataset_ref(self) -> str:
        return self.dataset_uri or self.dataset

    def train_args(self, errors: dict[str, str], *, launch: bool = False) -> dict[str, Any]:
        """The trainer's arguments; a bad number goes into ``errors`` next to its field."""
        args: dict[str, Any] = {"model": self.model or "yolo11n.yaml", "data": self.dataset_ref}
        args["epochs"] = integer(self.epochs, "epochs", errors, 1, 10_000)
        args["imgsz"] = integer(self.imgsz, "imgsz", errors, 32, 4096)
        args["batch"] = integer(self.batch, "batch", errors, -1, 4096)
        if args["batch"] == 0:
            errors["batch"] = "Enter a batch of at least 1, or -1 for AutoBatch."
        args["patience"] = integer(self.patience, "patience", errors, 0, 10_000)
        if launch and self.quick:
            fraction = _number(self.quick_fraction, "quick_fraction", errors, 0.01, 0.99)
            epochs = integer(self.quick_epochs, "quick_epochs", errors, 1, 5)
            args.update(fraction=fraction, epochs=epochs)
        return args

    def gpu_count(self, errors: dict[str, str]) -> int:
        return integer(self.gpus, "gpus", errors, 1, MAX_GPU_COUNT)

    def constraints(self, errors: dict[str, str]) -> tuple[float | None, float | None]:
        """(deadline in minutes, budget in cents) for the advisor."""
        deadline = _number(self.deadline, "deadline", errors, 0.01, 10_000) if self.deadline else None
        budget = _number(self.budget, "budget", errors, 0.01, 1_000_000) if self.budget else None
        return (deadline * 60 if deadline else None), (budget * 100 if budget else None)

    def max_cost_cents(self, errors: dict[str, str]) -> float | None:
        value = _number(self.max_cost, "max_cost", errors, 0.01, 1_000_000) if self.max_cost else None
        return value * 100 if value else None


def _number(text: str, name: str, errors: dict[str, str], low: float, high: float) -> float:
    try:
        value = float(text)
    except ValueError:
        errors[name] = "Enter a number."
        return low
    if not math.isfinite(value) or not low <= value <= high:
        errors[name] = f"Enter a number from {low:g} to {high:g}."
        return low
    return value


def integer(text: str, name: str, errors: dict[str, str], low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        errors[name] = "Enter a whole number."
        return max(low, 1)
    if not low <= value <= high:
        errors[name] = f"Enter a whole number from {low} to {high}."
        return max(low, 1)
    return value


hours = duration_text  # the table's times: "0.4 s", "<0.1 s", "3 min", "2.5 h"


def field_of(message: str) -> str:
    """The form field a service's error message is about (``form``: the form as a whole)."""
    for prefix, name in FIELD_OF:
        if message.startswith(prefix):
            return name
    return "form"


def arrange(result: dict[str, Any], picks: dict[str, Any], runnable: set[str], *, deadline_minutes: float | None,
            budget_cents: float | None) -> list[dict[str, Any]]:
    """The estimates, each marked runnable here / usable / within the constraints and with its picks (the advisor
    marks the Pareto front); with a deadline or budget, those within them first (by cost), then the rest."""
    marks: dict[str, list[str]] = {}
    for kind in ("cheapest", "fastest", "balanced"):
        pick = picks.get(kind)
        if pick:
            marks.setdefault(pick["gpuType"], []).append(kind)
    rows = []
    for item in result["estimates"]:
        here = item["gpuType"] in runnable
        usable = item["fits"] and item["allowed"] and here
        within = usable and (deadline_minutes is None or item["totalSeconds"]["value"] <= deadline_minutes * 60) \
            and (budget_cents is None or item["costCents"]["value"] <= budget_cents)
        rows.append({**item, "runnable": here, "usable": usable, "within": within,
                     "picks": marks.get(item["gpuType"], [])})
    constrained = deadline_minutes is not None or budget_cents is not None
    rows.sort(key=lambda r: (not r["within"] if constrained else not r["usable"], r["costCents"]["value"],
                             r["totalSeconds"]["value"]))
    return rows


def choose(rows: list[dict[str, Any]], picks: dict[str, Any], form: TrainForm) -> dict[str, Any] | None:
    """The checked row: the user's own choice among the types that run here, else the advice (the balanced
    pick, which meets the deadline and budget where one does). A choice equal to the advice given last time
    (``advised``) is the advice's, not the user's, so it follows the advice when the settings change."""
    here = [r for r in rows if r["runnable"]]
    own = form.gpu if form.gpu and form.gpu != form.advised else None
    balanced = (picks.get("balanced") or {}).get("gpuType")
    return (next((r for r in here if r["gpuType"] == own), None)
            or next((r for r in here if r["gpuType"] == balanced), None)
            or next((r for r in here if r["usable"]), None)
            or (here[0] if here else None))


def dialog_url(**query: Any) -> str:
    """``/train?...``: the dialog opened with these fields filled in (empty ones left out)."""
    return "/train?" + urlencode({k: v for k, v in query.items() if v not in ("", None)}) if any(
        v not in ("", None) for v in query.values()) else "/train"


def train_again_url(record: Any, launch_args: dict[str, Any] | None, *, owner: str, project: str,
                    username: str) -> str:
    """The dialog for another run like this model's: its dataset, its settings, the model itself as the starting
    point when it has weights (else its architecture), into its project when that is the user's own."""
    args = {**(record.train_args or {}), **(launch_args or {})}
    data = str(args.get("data") or "")
    base = str(args.get("model") or record.base_model or "")
    start = f"ul://{owner}/{project}/{record.slug}" if record.weights_sha256 else (
        base if base in OFFICIAL_MODELS or base.startswith("ul://") else "")
    return dialog_url(dataset=data if data.startswith("ul://") else "", model=start,
                      epochs=args.get("epochs"), imgsz=args.get("imgsz"), batch=args.get("batch"),
                      project=project if owner == username else "")
