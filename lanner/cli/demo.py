"""``lanner demo``: a workspace to try Lanner with, made on this machine with nothing downloaded. A user with
credit, a fresh password and API key at every call, a small detection dataset (``shapes``: circles and squares
drawn by ``lanner.synthetic``), imported once like any upload, and a pretrained starting model of its own.

The starting model matters: a first model trained from random weights on 24 images learns nothing (mAP 0.000
after 5 epochs), and a server without internet has no official weights to fine-tune. So, unless the server already
has a detection start (``projects.starting``), the demo queues a real run through the normal queue: ``yolo11n``
learns to find shapes (one class, ``shape``) on 200 other synthetic images, and is offered as a starting point.
A newcomer's first fine-tune and the labelling assistant's first round then start from it and only have to learn
which shape is which. Calling the demo again changes only the password and adds a key."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from lanner.accounts import passwords
from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.billing import service as billing_service
from lanner.context import AppContext
from lanner.datasets import service as datasets_service
from lanner.datasets.imports.ingest import commit_import, prepare_import
from lanner.errors import LannerError, NotFound
from lanner.gpus.catalogue import get_catalogue
from lanner.projects import service as projects_service
from lanner.projects import starting
from lanner.projects.models import ModelRecord
from lanner.scratch import scratch_folder
from lanner.synthetic import make_detection_dataset
from lanner.training import launch
from lanner.training.executors import make_executor
from lanner.training.schemas import StartRequest

DEMO_DATASET = "shapes"
DEMO_CREDIT_USD = 50
DEMO_IMAGES = {"train": 24, "val": 8}
STARTER_DATASET = "shapes-pretraining"
STARTER_IMAGES = {"train": 200, "val": 30}
STARTER_PROJECT = "starter"
STARTER_MODEL = "shapes-base"
# Small images, one class: a few minutes on two CPU cores (docs/benchmarks.md, "The first hour").
STARTER_ARGS = {"model": "yolo11n.yaml", "epochs": 20, "imgsz": 128, "batch": 16, "plots": False}
STARTER_NOTE = ("Pretrained by `lanner demo` on this machine: yolo11n, 20 epochs on 200 synthetic images of one "
                "class (shape); it finds shapes, a fine-tune teaches it yours")


@dataclass(frozen=True)
class DemoWorkspace:
    username: str
    password: str
    key: str
    dataset: str  # ul://...
    images_added: int  # 0 when the dataset was there already
    starting_model: str | None  # ul://... of the starting model queued now; None when the server had a start
    starting_problem: str | None = None  # why no starting model could be queued


def _principal(ctx: AppContext, username: str) -> Principal:
    with ctx.db.session() as session:
        return Principal.of(accounts_service.require_user(session, username=username))


def ensure_user(ctx: AppContext, *, username: str, password: str) -> str:
    """The demo user (``pro``, with credit the first time) signing in with ``password``; returns a new API key."""
    with ctx.db.session() as session:
        user = accounts_service.get_user_by_username(session, username=username)
        if user is None:
            user = accounts_service.create_user(session, username=username, password=password, tier="pro")
            billing_service.top_up(session, user_id=user.id, micros=billing_service.dollars_to_micros(DEMO_CREDIT_USD),
                                   description="Initial credits")
        else:
            passwords.set_password(session, user=user, password=password)
        return accounts_service.create_api_key(session, user=user, name="demo")[1]


def _has_images(ctx: AppContext, principal: Principal, slug: str) -> bool:
    with ctx.db.session() as session:
        try:
            dataset = datasets_service.get_dataset(session, principal, owner=principal.username, slug=slug,
                                                   include_trashed=True)
        except NotFound:
            return False
        return dataset.deleted_at is not None or datasets_service.counts(session, dataset.manifest_id)["images"] > 0


def ensure_dataset(ctx: AppContext, *, username: str) -> int:
    """Draw and import the demo dataset unless it is there; returns how many images were added."""
    return _import_synthetic(ctx, username, DEMO_DATASET, images=DEMO_IMAGES, seed=7, single_class=False,
                             description="Circles and squares drawn by lanner.synthetic: a dataset to try Lanner with.")


def _import_synthetic(ctx: AppContext, username: str, slug: str, *, images: dict[str, int], seed: int,
                      single_class: bool, description: str, purpose: str | None = None) -> int:
    """Like ``lanner datasets import``: images are stored first, then one transaction creates the dataset and adds
    them. Nothing happens when the dataset has images (or was moved to the trash: the user's choice stands)."""
    principal = _principal(ctx, username)
    if _has_images(ctx, principal, slug):
        return 0
    with scratch_folder(ctx.settings.resolved_home, "demo-") as folder:
        make_detection_dataset(folder / slug, train=images["train"], val=images["val"], seed=seed,
                               single_class=single_class)
        with prepare_import(blobs=ctx.blobs, settings=ctx.settings, source=folder / slug) as prepared, \
                ctx.db.session() as session:
            try:
                dataset = datasets_service.get_dataset(session, principal, owner=username, slug=slug, write=True)
            except NotFound:
                dataset = datasets_service.create_dataset(session, principal, name=slug, task="detect",
                                                          description=description)
                dataset.purpose = purpose
            return commit_import(session, prepared, dataset=dataset, queued=False).added


def ensure_starting_model(ctx: AppContext, *, username: str) -> str | None:
    """Queue the demo's pretrained start unless the server has a detection start already (official weights, or
    this one, ready or training); returns the queued model's URI, else None. The run is an ordinary one: the
    server's supervisor runs it on its executor (the CPU on one machine) as soon as ``lanner serve`` starts, and
    the demo's credit pays for it (about a cent at the CPU's price)."""
    principal = _principal(ctx, username)
    with ctx.db.session() as session:
        # A start ready or on its way: nothing to do. One that failed (the server stopped mid-run) is run again.
        if any(start.status not in ("failed", "cancelled") for start in starting.choices(session, principal, "detect")):
            return None
    _import_synthetic(ctx, username, STARTER_DATASET, images=STARTER_IMAGES, seed=11, single_class=True,
                      purpose="pretraining",
                      description="Synthetic shapes of one class: what the demo's starting model "
                                  f"({STARTER_PROJECT}/{STARTER_MODEL}) was pretrained on.")
    with ctx.db.session() as session:
        project = projects_service.get_or_create_project(session, owner_id=principal.user_id, slug=STARTER_PROJECT)
        project.name, project.visibility = "Starting points", "public"
        project.description = "Pretrained models that new models start from (made by lanner demo)."
        model = session.scalar(select(ModelRecord).where(ModelRecord.project_id == project.id,
                                                         ModelRecord.slug == STARTER_MODEL))
        if model is None:
            model = projects_service.create_model(session, project, name=STARTER_MODEL, task="detect",
                                                  description=STARTER_NOTE)
        launch.start(session, principal, StartRequest(modelId=model.id, trainArgs={
            **STARTER_ARGS, "data": f"ul://{username}/datasets/{STARTER_DATASET}"}),
            catalogue=get_catalogue(ctx.settings), executor=make_executor(ctx.settings),
            executor_name=ctx.settings.executor)
        starting.offer(session, model, note=STARTER_NOTE)
        return f"ul://{username}/{STARTER_PROJECT}/{model.slug}"


def ensure_workspace(ctx: AppContext, *, username: str, password: str, starting_model: bool = True) -> DemoWorkspace:
    key = ensure_user(ctx, username=username, password=password)
    added = ensure_dataset(ctx, username=username)
    starter, problem = None, None
    if starting_model:
        try:
            starter = ensure_starting_model(ctx, username=username)
        except LannerError as error:  # e.g. its pretraining data trashed: the workspace is still usable
            problem = error.message
    return DemoWorkspace(username=username, password=password, key=key,
                         dataset=f"ul://{username}/datasets/{DEMO_DATASET}", images_added=added,
                         starting_model=starter, starting_problem=problem)
