"""What a round trains on: a dataset of the owner's that holds only the labelled images of the assistant's
dataset (``<slug>-assistant-data``), rebuilt before each round and frozen by the run itself
(``captureDatasetVersion``), so the round's version says exactly which labels it learnt from.

Why a dataset of its own rather than the person's: training through the ordinary path needs a ``ul://`` dataset,
and the person's own one holds unlabelled images and splits nobody chose for the assistant. Here the labelled
images keep their split, except that at least a fifth of them (two at the least) are put in ``val`` when the
person's labelled images hold fewer: the run's mAP50 is then always measured on labelled validation images. The
images moved are the first labelled training images by key (random, stable), so a round's validation images
stay validation images in the next round whenever they can."""

from __future__ import annotations

import math

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem, Manifest
from lanner.slugs import slugify, unique_slug

VAL_SHARE = 0.2
MIN_VAL = 2


def labelled(manifest_id: int) -> list:
    """Conditions of a labelled item of a manifest: a label file (even an empty one) or a whole-image class."""
    return [DatasetItem.manifest_id == manifest_id,
            or_(DatasetItem.labels.is_not(None), DatasetItem.class_id.is_not(None))]


def labelled_count(session: Session, dataset: Dataset) -> int:
    """Remembered per revision (``datasets_service.remembered_count``: every label change bumps it): the
    assistants' loop asks on every poll, and most polls find nothing changed."""
    return datasets_service.remembered_count(session, dataset, "assistant-labelled", _count_labelled)


def _count_labelled(session: Session, manifest_id: int) -> int:
    return int(session.scalar(select(func.count()).select_from(DatasetItem).where(*labelled(manifest_id))) or 0)


def refresh(session: Session, principal: Principal, source: Dataset, derived: Dataset | None) -> Dataset:
    """The training dataset with ``source``'s labelled images as they are now (created on first use)."""
    if derived is None or derived.deleted_at is not None:
        base = slugify(f"{source.slug}-assistant-data")
        taken = session.scalars(select(Dataset.slug).where(Dataset.owner_id == source.owner_id,
                                                           Dataset.slug.like(f"{base}%")))
        derived = datasets_service.create_dataset(
            session, principal, name=f"{source.name} (assistant training data)", slug=unique_slug(base, taken),
            description=f"The labelled images of {source.slug} that its labelling assistant trains on; rebuilt "
                        "before each round (each round's run keeps a version of it).",
            task=source.task, class_names=list(source.class_names or []))
        derived.purpose = "assistant"  # out of the owner's lists: reached from the dataset's assistant section
    manifest = Manifest()
    session.add(manifest)
    session.flush()
    datasets_service.copy_items(session, manifest.id, *labelled(source.manifest_id))
    _ensure_val(session, manifest.id)
    old = derived.manifest_id
    derived.manifest_id = manifest.id
    derived.task, derived.class_names, derived.kpt_shape = source.task, list(source.class_names or []), \
        source.kpt_shape
    datasets_service.touch(derived)
    session.flush()
    if old != manifest.id:
        datasets_service.drop_manifest_if_orphan(session, old)
    return derived


def _ensure_val(session: Session, manifest_id: int) -> None:
    # By file name: the same labels give the same split on every run (keys are random per upload, and which
    # images validate changed a round's mAP50 from 0.14 to 0.31 between two uploads of the same images).
    items = list(session.scalars(select(DatasetItem).where(DatasetItem.manifest_id == manifest_id)
                                 .order_by(DatasetItem.name, DatasetItem.key)))
    wanted = max(MIN_VAL, math.ceil(VAL_SHARE * len(items)))
    val_names = {item.name for item in items if item.split == "val"}
    missing = wanted - len(val_names)
    for item in items:
        if missing <= 0 or len(items) - len(val_names) <= 1:  # keep a training image
            break
        if item.split == "train" and item.name not in val_names:
            item.split = "val"
            val_names.add(item.name)
            missing -= 1
    session.flush()
