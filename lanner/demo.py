"""``lanner demo``: a workspace to try Lanner with, made on this machine with nothing downloaded. A user with
credit, a fresh password and API key at every call, and a small detection dataset (``shapes``: circles and
squares drawn by ``lanner.synthetic``), imported once like any upload. Calling it again changes only the
password and adds a key."""

from __future__ import annotations

from dataclasses import dataclass

from lanner.accounts import passwords
from lanner.accounts import service as accounts_service
from lanner.accounts.service import Principal
from lanner.billing import service as billing_service
from lanner.context import AppContext
from lanner.datasets import service as datasets_service
from lanner.datasets.ingest import commit_import, prepare_import
from lanner.errors import NotFound
from lanner.scratch import scratch_folder
from lanner.synthetic import make_detection_dataset

DEMO_DATASET = "shapes"
DEMO_CREDIT_USD = 50
DEMO_IMAGES = {"train": 24, "val": 8}


@dataclass(frozen=True)
class DemoWorkspace:
    username: str
    password: str
    key: str
    dataset: str  # ul://...
    images_added: int  # 0 when the dataset was there already


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


def _has_images(ctx: AppContext, principal: Principal) -> bool:
    """True when the demo dataset exists with images (or was moved to the trash: the user's choice stands)."""
    with ctx.db.session() as session:
        try:
            dataset = datasets_service.get_dataset(session, principal, owner=principal.username, slug=DEMO_DATASET,
                                                   include_trashed=True)
        except NotFound:
            return False
        return dataset.deleted_at is not None or datasets_service.counts(session, dataset.manifest_id)["images"] > 0


def ensure_dataset(ctx: AppContext, *, username: str) -> int:
    """Draw and import the demo dataset unless it is there; returns how many images were added. Like
    ``lanner datasets import``: images are stored first, then one transaction creates the dataset and adds them."""
    principal = _principal(ctx, username)
    if _has_images(ctx, principal):
        return 0
    with scratch_folder(ctx.settings.resolved_home, "demo-") as folder:
        make_detection_dataset(folder / DEMO_DATASET, train=DEMO_IMAGES["train"], val=DEMO_IMAGES["val"], seed=7)
        with prepare_import(blobs=ctx.blobs, settings=ctx.settings, source=folder / DEMO_DATASET) as prepared, \
                ctx.db.session() as session:
            try:
                dataset = datasets_service.get_dataset(session, principal, owner=username, slug=DEMO_DATASET,
                                                       write=True)
            except NotFound:
                dataset = datasets_service.create_dataset(
                    session, principal, name=DEMO_DATASET, task="detect",
                    description="Circles and squares drawn by lanner.synthetic: a dataset to try Lanner with.")
            return commit_import(session, prepared, dataset=dataset, queued=False).added


def ensure_workspace(ctx: AppContext, *, username: str, password: str) -> DemoWorkspace:
    key = ensure_user(ctx, username=username, password=password)
    added = ensure_dataset(ctx, username=username)
    return DemoWorkspace(username=username, password=password, key=key,
                         dataset=f"ul://{username}/datasets/{DEMO_DATASET}", images_added=added)
