"""What a training request names, resolved one way: the dataset (its images per split, classes, task) and the base
model (what the trainer loads and the architecture the GPU advisor profiles, both from one lookup), and from them
the estimate. The estimate endpoint, the train dialog, ``lanner estimate``, ``training.start`` and a quick run's
re-estimate all resolve here, so an estimate and a launch of the same request cannot disagree about how many
images it has or which model is profiled.

A refusal is an ``Unresolved`` (what, why); each caller says it in its own words and status codes, since both the
estimate's 400/404 naming ``dataset``/``model`` and ``training.start``'s 422 naming ``trainArgs.data``/
``trainArgs.model`` are part of their APIs.

Profiling a model the process has not seen (torch imported, the model built and traced: seconds, far more on a
busy machine) is ``TrainingInputs.profile``, apart from the database reads, because on SQLite every transaction
holds the write lock (``lanner.db``): a caller that can ends its transaction before it, and the estimate that
follows finds the profile remembered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.billing.metering import cost_micros
from lanner.datasets import service as datasets_service
from lanner.errors import LannerError, NotFound
from lanner.gpus import advisor
from lanner.gpus.catalogue import Catalogue
from lanner.projects import official, starting
from lanner.projects import service as projects_service
from lanner.training import refs


class Unresolved(Exception):
    """``what`` ("data" or "model") named ``name`` cannot be used because of ``why``: "shape" (not a URI of the
    right form), "name" (not a plain model name), "missing", "not_installed" (an official model this server does
    not have: ``detail``, the lookup's message, says how to add it), "not_ready" (a dataset still importing:
    ``status``), "empty" (no training images) or "no_weights" (a model with nothing to start from)."""

    def __init__(self, what: str, why: str, name: str, *, detail: str = "", status: str = "") -> None:
        super().__init__(f"{what}: {why} ({name})")
        self.what, self.why, self.name, self.detail, self.status = what, why, name, detail, status


@dataclass(frozen=True)
class DatasetRef:
    id: str
    uri: str
    task: str


@dataclass(frozen=True)
class BaseModel:
    trainer: str  # what the trainer loads (trainArgs.model): a ul:// model, or a YAML or weights name
    profiled: str  # the architecture the advisor profiles, as a YAML name: the server never opens a checkpoint


@dataclass(frozen=True)
class TrainingInputs:
    dataset: DatasetRef | None  # None: image counts given instead (the estimate's imageCount, --train-images)
    train: int
    val: int
    nc: int | None  # the dataset's classes; None: the model's own head
    model: BaseModel

    def profile(self, train_args: dict[str, Any]) -> None:
        """Build and profile the base model at the arguments' image size now, so the estimate that follows finds
        it remembered (``gpus.profile``, ``gpus.memory``). Best effort: arguments or a model the advisor refuses
        are left to the estimate, which refuses them in its caller's words."""
        from lanner.gpus import memory, profile  # torch, on the first profile not in the disk cache

        try:
            imgsz = advisor.normalise_args(_advised(train_args))["imgsz"]
            memory.activation_bytes_per_image(profile.model_profile(self.model.profiled, nc=self.nc), imgsz)
        except Exception:  # whatever fails here fails again in the estimate, which answers it
            return

    def estimate(self, session: Session, catalogue: Catalogue, train_args: dict[str, Any], *, tier: str,
                 gpu_types: list[str] | None = None, deadline_minutes: float | None = None,
                 budget_cents: float | None = None, source_image_size: tuple[int, int] | None = None,
                 gpu_count: int = 1) -> dict[str, Any]:
        """The advisor's answer for these inputs on ``gpu_count`` GPUs of each type, priced as billing charges
        (``billing.metering``), so an estimate costs what the run will be charged."""
        request = advisor.Request(model=self.model.profiled, train_images=self.train, val_images=self.val,
                                  train_args=_advised(train_args), gpu_types=gpu_types,
                                  deadline_minutes=deadline_minutes, budget_cents=budget_cents, tier=tier,
                                  nc=self.nc, source_image_size=source_image_size, gpu_count=gpu_count)
        return advisor.estimate(session, catalogue, request, price=cost_micros)


def _advised(train_args: dict[str, Any]) -> dict[str, Any]:
    """The arguments the advisor reads: the data and the model are the inputs' own."""
    return {key: value for key, value in train_args.items() if key not in ("model", "data")}


def resolve(session: Session, principal: Principal, *, model: Any, data: str | None,
            images: tuple[int, int] | None = None, to_train: bool = False) -> TrainingInputs:
    """What ``model`` and ``data`` (``ul://owner/datasets/slug``) name, as ``principal`` may read them; ``data``
    None: ``images`` (train, val) instead. ``to_train``: what ``training.start`` will hand a trainer, so a dataset
    must be ready and a ``ul://`` model must have weights (an estimate answers for either)."""
    if data is None:
        assert images is not None
        dataset, (train, val), nc, task = None, images, None, "detect"
    else:
        dataset, train, val, nc = _dataset(session, principal, data, to_train=to_train)
        task = dataset.task
    return TrainingInputs(dataset=dataset, train=train, val=val, nc=nc,
                          model=_base_model(session, principal, model, task=task, to_train=to_train))


def _dataset(session: Session, principal: Principal, uri: str,
             *, to_train: bool) -> tuple[DatasetRef, int, int, int | None]:
    parts = refs.dataset_parts(uri)
    if parts is None or not all(parts):
        raise Unresolved("data", "shape", uri)
    try:
        dataset = datasets_service.get_dataset(session, principal, owner=parts[0], slug=parts[1])
    except NotFound:
        raise Unresolved("data", "missing", uri) from None
    if to_train and dataset.status != "ready":
        raise Unresolved("data", "not_ready", uri, status=dataset.status)
    counts = datasets_service.dataset_counts(session, dataset)
    if counts["train"] == 0:
        raise Unresolved("data", "empty", uri)
    return (DatasetRef(dataset.id, uri, dataset.task), counts["train"], counts["val"],
            len(dataset.class_names or []) or None)


def _base_model(session: Session, principal: Principal, model: Any, *, task: str, to_train: bool) -> BaseModel:
    """No model named: the best pretrained start this server has for the task (``projects.starting``), else a
    YAML (random weights). A bare official weights name this server has installed (``yolo11n.pt``) trains from
    the operator's copy, so nothing is downloaded."""
    name = str(model) if model else default_base_model(session, principal, task)
    if refs.is_model_uri(name):
        parts = refs.model_parts(name)
        if parts is None or not all(parts):
            raise Unresolved("model", "shape", name)
        try:
            record = projects_service.get_model(session, principal, owner=parts[0], project=parts[1],
                                                model=parts[2])
        except NotFound as exc:
            why = "not_installed" if official.is_official_owner(parts[0]) else "missing"
            raise Unresolved("model", why, name, detail=exc.message) from None
        if to_train and record.weights_sha256 is None:
            raise Unresolved("model", "no_weights", name)
        return BaseModel(trainer=name, profiled=refs.architecture_of(record))
    if not refs.is_plain_name(name):
        raise Unresolved("model", "name", name)
    installed = official.find_by_weights_name(session, name)
    trainer = official.uri(official.split_name(name)[0], installed.slug) if installed is not None else name
    return BaseModel(trainer=trainer, profiled=refs.yaml_name(name))


def default_base_model(session: Session, principal: Principal, task: str) -> str:
    """What a model of ``task`` starts from when a request names none."""
    start = starting.best(session, principal, task)
    return start.uri if start is not None else scratch_yaml(task)


def scratch_yaml(task: str) -> str:
    """The architecture a model of ``task`` trains from when no pretrained start exists (random weights)."""
    suffix = {"segment": "-seg", "pose": "-pose", "obb": "-obb", "classify": "-cls"}.get(task, "")
    return f"yolo11n{suffix}.yaml"


def refusal(exc: Unresolved, words: dict[tuple[str, str], tuple[type[LannerError], str]]) -> LannerError:
    """``exc`` in a caller's ``words``: (what, why) -> (error class, message with {name}, {detail}, {status})."""
    kind, message = words[(exc.what, exc.why)]
    return kind(message.format(name=exc.name, detail=exc.detail, status=exc.status))
