"""Stored image selections (the map's lasso, ``datasets.selections``) on SQLite and PostgreSQL: the grid's listing
filters by one, with its other filters and total; each user keeps the ``KEEP`` newest per dataset; a selection is
its maker's alone."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.datasets import listing, selections
from lanner.datasets import service as datasets_service
from lanner.datasets.models import DatasetItem, ImageSelection, ImageSelectionItem
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
