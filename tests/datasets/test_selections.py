"""Stored image selections (the map's lasso, ``datasets.selections``) on SQLite and PostgreSQL: the grid's listing
filters by one, with its other filters and total; each user keeps the ``KEEP`` newest per dataset; a selection is
its maker's alone; its label queue and a dataset of just its images."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.datasets import listing, selections, versions
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem, ImageSelection, ImageSelectionItem
from lanner.errors import BadRequest, NotFound
from tests.web.test_dataset_pages import add_dataset


def _page(session, dataset, signer, selection: str, split: str | None = None) -> dict:
    return listing.list_images(session, dataset, signer=signer, limit=100, offset=0, cursor=None, include_total=True,
                               split=split, has_error=None, has_label=None, class_ids=None, text=None, issue=None,
                               sort="name", thumbnails=False, urls=False, labels=False, selection=selection)


def test_the_listing_filters_by_a_selection_kept_for_its_maker_alone(app, make_account, tmp_path):
    make_account("alice")
    make_account("bob")
    add_dataset(app, tmp_path)
    ctx = app.state.lanner
    with ctx.db.session() as session:
        alice = Principal.of(accounts_service.require_user(session, username="alice"))
        bob = Principal.of(accounts_service.require_user(session, username="bob"))
        dataset = datasets_service.get_dataset(session, alice, owner="alice", slug="shapes")
        items = session.execute(select(DatasetItem.key, DatasetItem.split).where(
            DatasetItem.manifest_id == dataset.manifest_id).order_by(DatasetItem.name)).all()
        chosen = [items[0].key, items[-1].key, items[-2].key]
        made = selections.create(session, alice, dataset, [*chosen, chosen[0], "gone"])  # repeats, a removed image
        assert made.count == 3
        page = _page(session, dataset, ctx.signer, made.id)
        assert page["total"] == 3 and {i["id"].split("-", 1)[1] for i in page["images"]} == set(chosen)
        splits = {i.key: i.split for i in items}
        val = _page(session, dataset, ctx.signer, made.id, split="val")
        assert val["total"] == sum(splits[k] == "val" for k in chosen)

        assert selections.get(session, alice, dataset, made.id) is made
        with pytest.raises(NotFound):
            selections.get(session, bob, dataset, made.id)
        with pytest.raises(BadRequest):
            selections.create(session, alice, dataset, [])
        with pytest.raises(BadRequest):
            selections.create(session, alice, dataset, ["not a key!"])

        for _ in range(selections.KEEP):  # older ones go as new ones come: KEEP per user and dataset
            selections.create(session, alice, dataset, chosen[:1])
        mine = session.scalar(select(func.count()).select_from(ImageSelection)
                              .where(ImageSelection.user_id == alice.user_id))
        assert mine == selections.KEEP and session.get(ImageSelection, made.id) is None
        assert not session.scalar(select(func.count()).select_from(ImageSelectionItem)
                                  .where(ImageSelectionItem.selection_id == made.id))


def test_a_selections_label_queue_and_its_own_dataset(app, make_account, tmp_path):
    """``listing.next_unlabelled`` walks the selection's unlabelled images in the grid's order (row-value
    comparison on both databases), round again, never outside it; ``versions.clone_selection`` copies just its
    items into a new manifest, the source's untouched."""
    make_account("alice")
    add_dataset(app, tmp_path)
    with app.state.lanner.db.session() as session:
        alice = Principal.of(accounts_service.require_user(session, username="alice"))
        dataset = datasets_service.get_dataset(session, alice, owner="alice", slug="shapes")
        keys = list(session.scalars(select(DatasetItem.key).where(DatasetItem.manifest_id == dataset.manifest_id)
                                    .order_by(DatasetItem.name, DatasetItem.key)))
        unlabelled = [keys[0], keys[2], keys[5], keys[6]]
        session.execute(update(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id).values(
            labels=[{"classId": 0, "bbox": [0.5, 0.5, 0.1, 0.1]}], label_count=1))
        session.execute(update(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id,
                                                  DatasetItem.key.in_(unlabelled))
                        .values(labels=None, label_count=0, class_id=None))
        made = selections.create(session, alice, dataset, [keys[1], keys[2], keys[5]])
        walk = [listing.next_unlabelled(session, dataset, after=after, selection=made.id)
                for after in (None, keys[2], keys[5], keys[1])]
        assert walk == [(keys[2], 2), (keys[5], 2), (keys[2], 2), (keys[2], 2)]
        assert listing.next_unlabelled(session, dataset, after=keys[6], selection=None) == (keys[0], 4)

        copy = versions.clone_selection(session, alice, dataset, made, name="picked")
        assert copy["imageCount"] == 3 and copy["dataset"] == "picked"
        copied = session.scalars(select(DatasetItem.key).join(Dataset, Dataset.manifest_id == DatasetItem.manifest_id)
                                 .where(Dataset.slug == "picked"))
        assert sorted(copied) == sorted([keys[1], keys[2], keys[5]])
        assert datasets_service.counts(session, dataset.manifest_id)["images"] == len(keys)
