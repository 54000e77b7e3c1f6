"""Official models: the ``ultralytics`` owner, whose public projects ``yolo26``, ``yolo11``, ``yolov8`` and
``yolov5`` hold the weights this server's operator provides.

The official client turns ``model=yolo11n.pt`` into ``ul://ultralytics/yolo11/yolo11n`` (the first family the
name starts with, and the file's stem) and looks it up before it trains from it or clones it. Here that model is
a row like any other, with its weights in the blob store, so it is read, downloaded and cloned through the
ordinary paths. Nothing is downloaded: a file comes from ``lanner models add-official FILE`` or from the folder
``LANNER_OFFICIAL_MODELS_DIR`` (``OfficialFolder``); its task and class names are read from the checkpoint,
which the operator vouches for (users' checkpoints are never unpickled by the server).

Nobody can sign in as ``ultralytics`` or hold its keys (``accounts.service.SYSTEM_USERNAMES``), so these models
are readable by every user and writable by none; an official model that is missing is a 404 that says how to
add it."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts import service as accounts_service
from lanner.accounts.models import User
from lanner.errors import BadRequest
from lanner.projects.models import TASKS, ModelRecord, Project
from lanner.slugs import slugify
from lanner.status import record_created
from lanner.storage.blobs import BlobStore, file_digest

log = logging.getLogger("lanner.official")

OWNER = "ultralytics"
# The official client's families, in its order (the first one a name starts with wins), and their display names.
FAMILIES = {"yolo26": "YOLO26", "yolo11": "YOLO11", "yolov8": "YOLOv8", "yolov5": "YOLOv5"}
LICENSE = "AGPL-3.0"


def family_of(name: str) -> str | None:
    return next((family for family in FAMILIES if name.startswith(family)), None)


def split_name(name: str) -> tuple[str, str]:
    """(family, model slug) of an official name or file name: ``yolo11n.pt`` -> ``("yolo11", "yolo11n")``."""
    stem = Path(name).name.removesuffix(".pt")
    family = family_of(stem)
    if family is None or slugify(stem) != stem:
        raise BadRequest(f"'{name}' is not an official model name: it must start with one of "
                         f"{', '.join(FAMILIES)} and hold only lowercase letters, digits and hyphens "
                         f"(e.g. yolo11n, yolo26s-seg); name it with --name")
    return family, stem


def is_official_owner(owner: str) -> bool:
    return owner.lower() == OWNER


def missing(project: str, model: str | None = None) -> str | None:
    """The 404 message for an official project or model that is not installed here; None when the path is not an
    official name at all (an ordinary 404 then)."""
    if project not in FAMILIES:
        return None
    if model is None:
        return (f"no official {FAMILIES[project]} models are installed on this server: ask the operator to run "
                f"`lanner models add-official FILE` (e.g. {project}n.pt)")
    if family_of(model) != project:
        return None
    return (f"official model 'ul://{OWNER}/{project}/{model}' is not installed on this server: ask the operator "
            f"to run `lanner models add-official {model}.pt`")


def read_only_message(project: str) -> str:
    return (f"official models are read-only: clone 'ul://{OWNER}/{project}/...' into your workspace "
            f"(models.clone) to change or export it")


@dataclass(frozen=True)
class Checkpoint:
    """What registering needs from a checkpoint."""

    task: str
    class_names: list[str]
    base_model: str | None
    metrics: dict[str, float] | None


def read_checkpoint(path: Path) -> Checkpoint:
    """Task, class names, the architecture it was trained from and its final metrics. Loads the pickle: for the
    operator's own files only."""
    # start-up cost: torch and ultralytics load only when an official file is registered
    from ultralytics.nn.tasks import load_checkpoint

    try:
        model, ckpt = load_checkpoint(str(path.resolve()))
    except Exception as exc:  # any unreadable file: the operator is told which and why, in one line
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise BadRequest(f"{path.name} is not an Ultralytics checkpoint: {detail}") from None
    task = str(getattr(model, "task", "") or "")
    if task not in TASKS:
        raise BadRequest(f"{path.name}: unknown task '{task}'")
    names = getattr(model, "names", None) or {}
    class_names = [str(names[k]) for k in sorted(names)] if isinstance(names, dict) else [str(n) for n in names]
    base = str((ckpt.get("train_args") or {}).get("model") or "").replace("\\", "/").rsplit("/", 1)[-1]
    metrics = {str(k): float(v) for k, v in (ckpt.get("train_metrics") or {}).items()
               if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}
    return Checkpoint(task=task, class_names=class_names, base_model=base if base.endswith(".yaml") else None,
                      metrics=metrics or None)


def _project(session: Session, owner_id: str, family: str) -> Project:
    project = session.scalar(select(Project).where(Project.owner_id == owner_id, Project.slug == family))
    if project is None:
        project = Project(owner_id=owner_id, slug=family, name=FAMILIES[family], visibility="public",
                          description=f"Official Ultralytics {FAMILIES[family]} models, provided by this server's "
                                      f"operator.", tags=[], license=LICENSE, metadata_={})
        session.add(project)
        session.flush()
    return project


def find(session: Session, family: str, slug: str) -> ModelRecord | None:
    return session.scalar(select(ModelRecord).join(Project, Project.id == ModelRecord.project_id)
                          .join(User, User.id == Project.owner_id)
                          .where(User.username == OWNER, Project.slug == family,
                                 ModelRecord.slug == slug))


def find_by_weights_name(session: Session, name: str) -> ModelRecord | None:
    """The installed official model a bare weights name (``yolo11n.pt``) stands for; None if it is not one."""
    if not name.endswith(".pt"):
        return None
    try:
        family, slug = split_name(name)
    except BadRequest:
        return None
    return find(session, family, slug)


def register(session: Session, *, name: str, sha256: str, size: int, checkpoint: Checkpoint) -> ModelRecord:
    """Create official model ``name`` or give it new weights (models cloned earlier keep theirs)."""
    family, slug = split_name(name)
    owner = accounts_service.ensure_system_user(session, username=OWNER, full_name="Ultralytics")
    project = _project(session, owner.id, family)
    record = session.scalar(select(ModelRecord).where(ModelRecord.project_id == project.id,
                                                      ModelRecord.slug == slug))
    created = record is None
    if record is None:
        record = ModelRecord(project_id=project.id, owner_id=owner.id, slug=slug, name=slug, status="completed",
                             metadata_={})
        session.add(record)
    record.description = f"Official Ultralytics {slug} weights, provided by this server's operator."
    record.task, record.class_names = checkpoint.task, checkpoint.class_names
    record.base_model, record.metrics = checkpoint.base_model, checkpoint.metrics
    record.weights_sha256, record.weights_size, record.weights_name = sha256, size, f"{slug}.pt"
    if created:
        record_created(session, record, reason="official weights registered")  # a finished model from the start
    session.flush()
    return record


def uri(family: str, slug: str) -> str:
    return f"ul://{OWNER}/{family}/{slug}"


def install_file(db: Any, blobs: BlobStore, path: Path, *, name: str | None = None) -> str:
    """Read, store and register one file as official model ``name`` (default: the file's stem); returns its
    ``ul://`` URI. The checkpoint is read before anything is stored, and registered in one transaction."""
    family, slug = split_name(name or path.name)
    checkpoint = read_checkpoint(path)
    sha256 = file_digest(path)
    blobs.put_path(path, sha256)
    with db.session() as session:
        register(session, name=name or path.name, sha256=sha256, size=path.stat().st_size, checkpoint=checkpoint)
    return uri(family, slug)


class OfficialFolder:
    """``LANNER_OFFICIAL_MODELS_DIR``: registers each ``<name>.pt`` there that is new or whose bytes changed.

    A file is hashed once per process and then only when its size or modification time changes, so a pass over
    an unchanged folder reads nothing; registration is by content, so several processes (``serve --workers``)
    may pass at once. A file whose name is no official name is skipped (reported once); removing a file keeps
    the model it registered."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder.expanduser() if folder else None
        self._seen: dict[Path, tuple[int, int, str]] = {}  # path -> (size, mtime_ns, sha256) registered

    def sync(self, db: Any, blobs: BlobStore) -> list[str]:
        """One pass; returns the URIs it registered. A bad file is reported once (until it changes) and skipped;
        a failure (a race with another process) is logged and retried on the next pass."""
        if self.folder is None or not self.folder.is_dir():
            return []
        registered = []
        for path in sorted(self.folder.glob("*.pt")):
            stat = path.stat()
            known = self._seen.get(path)
            if known is not None and known[:2] == (stat.st_size, stat.st_mtime_ns):
                continue
            try:
                done = self._sync_file(db, blobs, path)
            except BadRequest as exc:
                log.warning("official models folder: skipped %s: %s", path.name, exc.message)
                self._seen[path] = (stat.st_size, stat.st_mtime_ns, "")
                continue
            except Exception:
                log.exception("official models folder: %s failed; the next pass retries", path.name)
                continue
            self._seen[path] = (stat.st_size, stat.st_mtime_ns, done[1])
            if done[0]:
                registered.append(done[0])
        return registered

    @staticmethod
    def _sync_file(db: Any, blobs: BlobStore, path: Path) -> tuple[str | None, str]:
        """(the URI when it registered something, the file's digest)."""
        family, slug = split_name(path.name)
        sha256 = file_digest(path)
        with db.session() as session:
            record = find(session, family, slug)
            if record is not None and record.weights_sha256 == sha256:
                return None, sha256
        checkpoint = read_checkpoint(path)
        blobs.put_path(path, sha256)
        with db.session() as session:
            register(session, name=path.name, sha256=sha256, size=path.stat().st_size, checkpoint=checkpoint)
        log.info("official model %s registered from %s", slug, path)
        return uri(family, slug), sha256
