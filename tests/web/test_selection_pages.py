"""A selection's bulk actions beyond move and remove, in-process: "Label these" opens the editor in the
selection's label queue, whose next image never leaves the selection and which says when it is done; "New
dataset from these" makes a private dataset of just those images. Both are the selection maker's alone (a second
user: 404). The browser walk is in test_map_browser.py."""

from __future__ import annotations

import json

from sqlalchemy import select, update

from lanner.datasets.models import Dataset, DatasetItem
from tests.web.pages import sign_in, soup, text, token_of
from tests.web.test_dataset_pages import add_dataset, thumbs


def _items(app, slug: str = "shapes") -> list:
    """The dataset's items in the grid's order (name, key)."""
    with app.state.lanner.db.session() as session:
        manifest = session.scalar(select(Dataset.manifest_id).where(Dataset.slug == slug))
        return session.execute(select(DatasetItem.key, DatasetItem.name, DatasetItem.labels).where(
            DatasetItem.manifest_id == manifest).order_by(DatasetItem.name, DatasetItem.key)).all()


def _label(app, keys: list[str], labelled: bool) -> None:
    """Set images labelled (one box of class 0) or unlabelled, as the annotation API's save leaves them."""
    with app.state.lanner.db.session() as session:
        manifest = session.scalar(select(Dataset.manifest_id).where(Dataset.slug == "shapes"))
        values = ({"labels": [{"classId": 0, "bbox": [0.5, 0.5, 0.2, 0.2]}], "label_count": 1, "class_list": ",0,",
                   "class_mask": 1} if labelled else
                  {"labels": None, "label_count": 0, "class_id": None, "class_list": ",", "class_mask": 0})
        session.execute(update(DatasetItem).where(DatasetItem.manifest_id == manifest, DatasetItem.key.in_(keys))
                        .values(**values))


def _select(client, base: str, keys: list[str]) -> str:
    token = token_of(client.get(base).text)
    made = client.post(f"{base}/map/selection", json={"keys": keys}, headers={"X-CSRFToken": token})
    assert made.status_code == 200, made.text
    return made.json()["id"]


def test_label_these_walks_only_the_selection_and_says_when_it_is_done(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")  # bob may read it: not her selection, not her editor
    items = _items(app)
    chosen = [items[1].key, items[4].key, items[7].key]  # three images, not next to each other by name
    outside = [i.key for i in items if i.key not in chosen]
    _label(app, [i.key for i in items], True)
    _label(app, [chosen[0], chosen[2], outside[0], outside[-1]], False)  # unlabelled inside and outside it
    sign_in(client)
    sel = _select(client, base, chosen)

    grid = soup(client.get(f"{base}?sel={sel}"))  # the grid's bulk bar offers both for the lasso's images
    assert text(grid.select_one("#ds-bulk-label")) == "Label these 3"
    assert text(grid.select_one("#ds-bulk-clone")) == "New dataset from these 3"
    assert grid.select_one("#ds-bulk")["data-selection"] == sel

    first = client.get(f"{base}/annotate?sel={sel}", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == f"{base}/annotate/{chosen[0]}?sel={sel}"
    page = soup(client.get(first.headers["location"]))
    assert text(page.select_one("#an-queue-text")) == "Labelling 3 selected images · 2 unlabelled"
    assert page.select_one("#an-queue-leave")["href"] == f"{base}/annotate/{chosen[0]}"  # the whole dataset again
    editor = json.loads(page.select_one("#an-editor")["data-editor"])
    assert editor["query"] == f"?sel={sel}" and editor["queue"]["count"] == 3
    assert editor["selection"] == [chosen[2]]  # "Propose labels" on the next unlabelled images: the selection's

    def queue(after: str) -> dict:
        answer = client.get(f"{base}/label-queue?sel={sel}&after={after}")
        assert answer.status_code == 200, answer.text
        return answer.json()

    assert queue(chosen[0])["next"] == chosen[2]  # past the labelled one, never the unlabelled ones outside
    assert queue(chosen[2]) == {"next": chosen[0], "left": 2, "count": 3, "grid": f"{base}?sel={sel}",
                                "url": f"{base}/annotate/{chosen[0]}?sel={sel}"}  # round again
    _label(app, [chosen[0]], True)
    assert queue(chosen[0])["next"] == chosen[2]
    _label(app, [chosen[2]], True)
    assert queue(chosen[2]) == {"next": None, "left": 0, "count": 3, "grid": f"{base}?sel={sel}", "url": None}
    done = soup(client.get(f"{base}/annotate/{chosen[2]}?sel={sel}"))
    assert text(done.select_one("#an-queue-text")) == "Labelling 3 selected images · all labelled"
    assert client.get(f"{base}/label-queue?after={chosen[2]}").json()["next"] in outside  # no sel: the dataset's

    sign_in(client, "bob")
    assert client.get(f"{base}/annotate?sel={sel}", follow_redirects=False).status_code == 404
    assert client.get(f"{base}/annotate/{chosen[0]}?sel={sel}").status_code == 404
    assert client.get(f"{base}/label-queue?sel={sel}").status_code == 404


def test_a_selections_own_queue_and_editor_are_404_with_another_users_selection(client, app, alice, bob,
                                                                                  tmp_path):
    add_dataset(app, tmp_path, username="bob", slug="his")
    base = add_dataset(app, tmp_path)
    sign_in(client)
    sel = _select(client, base, [_items(app)[0].key])
    sign_in(client, "bob")  # his own dataset, her selection's id
    assert client.get(f"/datasets/bob/his/annotate?sel={sel}", follow_redirects=False).status_code == 404
    assert client.get(f"/datasets/bob/his/label-queue?sel={sel}").status_code == 404


def test_new_dataset_from_these_copies_just_the_selected_images(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")
    items = _items(app)
    chosen = [items[0].key, items[3].key]
    sign_in(client)
    sel = _select(client, base, chosen)
    token = token_of(client.get(base).text)
    made = client.post(f"{base}/selection/dataset", data={"csrf_token": token, "sel": sel, "name": "Hard cases"},
                       follow_redirects=False)
    assert made.status_code == 303 and made.headers["location"] == "/datasets/alice/hard-cases"
    page = client.get(made.headers["location"])
    assert "made of 2 selected images from shapes" in page.text
    assert sorted(li.select_one(".ds-select")["value"].split("-")[-1] for li in thumbs(soup(page))) == sorted(chosen)
    copied = {i.key: i.labels for i in _items(app, "hard-cases")}
    assert copied == {i.key: i.labels for i in items if i.key in chosen}  # labels as they were
    assert len(_items(app)) == len(items)  # the source keeps all its images
    with app.state.lanner.db.session() as session:
        copy = session.scalar(select(Dataset).where(Dataset.slug == "hard-cases"))
        assert copy.visibility == "private" and copy.manifest_id != session.scalar(
            select(Dataset.manifest_id).where(Dataset.slug == "shapes"))

    sign_in(client, "bob")
    token = token_of(client.get("/datasets").text)
    assert client.post(f"{base}/selection/dataset", data={"csrf_token": token, "sel": sel},
                       follow_redirects=False).status_code == 404
    with app.state.lanner.db.session() as session:
        assert sorted(session.scalars(select(Dataset.slug))) == ["hard-cases", "shapes"]  # nothing of his


def _empty_dataset(app, username: str, slug: str) -> None:
    from lanner.accounts import service as accounts_service
    from lanner.accounts.principal import Principal
    from lanner.datasets import service as datasets_service

    with app.state.lanner.db.session() as session:
        principal = Principal.of(accounts_service.require_user(session, username=username))
        datasets_service.create_dataset(session, principal, name=slug, task="detect")


def test_add_these_to_copies_the_selection_into_another_of_ones_datasets(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")
    _empty_dataset(app, "alice", "more")
    _empty_dataset(app, "bob", "his")
    items = _items(app)
    by_name = {i.name: i for i in items}
    chosen = [by_name["train_0000.jpg"].key, by_name["copy.jpg"].key, by_name["train_0002.jpg"].key]  # same bytes
    sign_in(client)
    sel = _select(client, base, chosen)
    page = soup(client.get(f"{base}?sel={sel}"))
    offered = [o["value"] for o in page.select("#ds-bulk-target option")]
    assert offered == ["alice/more"]  # not the dataset itself, not bob's
    assert text(page.select_one("#ds-bulk-adopt")) == "Add these 3 to"

    token = token_of(client.get(base).text)
    added = client.post(f"{base}/selection/adopt", data={"csrf_token": token, "sel": sel, "target": "alice/more"},
                        follow_redirects=False)
    assert added.status_code == 303 and added.headers["location"] == "/datasets/alice/more"
    assert "Added 2 images from shapes to more, with their labels and splits; 1 was already there." in client.get(
        added.headers["location"]).text
    copied = {i.name: i.labels for i in _items(app, "more")}
    assert len(copied) == 2 and by_name["train_0002.jpg"].name in copied
    for name, labels in copied.items():  # labels as they were, whichever of the two same images came first
        assert labels == by_name[name].labels
    assert len(_items(app)) == len(items)  # the source keeps all its images

    refused = client.post(f"{base}/selection/adopt", data={"csrf_token": token, "sel": sel, "target": "bob/his"},
                          follow_redirects=False)
    assert refused.status_code == 303 and refused.headers["location"] == f"{base}?sel={sel}"
    assert _items(app, "his") == []
    assert "not found" in client.get(refused.headers["location"]).text

    sign_in(client, "bob")  # his own dataset as the target, her selection: 404, nothing copied
    token = token_of(client.get("/datasets").text)
    assert client.post(f"{base}/selection/adopt", data={"csrf_token": token, "sel": sel, "target": "bob/his"},
                       follow_redirects=False).status_code == 404
    assert _items(app, "his") == []
