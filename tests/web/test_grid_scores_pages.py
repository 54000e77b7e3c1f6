"""The dataset grid sorted and filtered by the review scores, in-process (issue 31): "Likeliest label mistakes
first" and "Most unique first" page in the database's order with unscored images last, "Possible mistakes only"
keeps the top tenth by mistakenness and combines with the other filters and the map's ``?sel=``, each thumbnail
says its score and why; without scores the choices are disabled and lead to the Review page; and an outsider
reading a public dataset gets the plain grid, as if the parameters were not there (the map's gate)."""

from __future__ import annotations

from sqlalchemy import delete, select

from lanner.accounts import service as accounts
from lanner.accounts.principal import Principal
from lanner.datasets.models import DatasetItem
from lanner.db import utcnow
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord
from lanner.review.models import ImageScore, ReviewJob
from lanner.teams import service as teams_service
from lanner.web import dataset_pages
from tests.web.pages import PASSWORD, sign_in, soup, text, token_of
from tests.web.test_dataset_pages import TRAIN, VAL, add_dataset, grid_count, thumbs
from tests.web.test_similar_pages import _dataset

IMAGES = TRAIN + VAL + 2
# name -> (mistakenness, uniqueness); bare.jpg (unlabelled) has none. Two share the top: ties stay together.
SCORES = {"train_0000.jpg": (0.95, 0.4), "val_0001.jpg": (0.95, None), "train_0003.jpg": (0.7, 1.0),
          "copy.jpg": (0.6, None), "train_0001.jpg": (0.5, 0.1), "val_0000.jpg": (0.4, None),
          "train_0002.jpg": (0.3, None), "train_0004.jpg": (0.2, None), "val_0002.jpg": (0.1, None),
          "train_0005.jpg": (0.0, None)}
NAMES = sorted([*SCORES, "bare.jpg"])


def by_mistake(keys: dict[str, str]) -> list[str]:
    """The grid's order: highest first, ties by key (the listing's tiebreak), the unscored image last."""
    return [*sorted(SCORES, key=lambda name: (-SCORES[name][0], keys[name])), "bare.jpg"]


def keys_by_name(app, owner: str = "alice") -> dict[str, str]:
    with app.state.lanner.db.session() as session:
        dataset = _dataset(session, owner, "shapes")
        return {name: key for name, key in session.execute(select(DatasetItem.name, DatasetItem.key).where(
            DatasetItem.manifest_id == dataset.manifest_id))}


def seed_scores(app, owner: str = "alice", model: ModelRecord | None = None) -> dict[str, str]:
    """A completed job's scores as ``review.service.finish`` leaves them: fresh with ``model`` (its weights as
    scored), else stale (the model is gone). The top image's worst finding: a class-0 label the model calls 1."""
    keys = keys_by_name(app, owner)
    with app.state.lanner.db.session() as session:
        dataset = _dataset(session, owner, "shapes")
        job = ReviewJob(dataset_id=dataset.id, owner_id=dataset.owner_id,
                        model_sha256=model.weights_sha256 if model else "d" * 64,
                        model_id=model.id if model else None,
                        model_label="ul://alice/shapes/tiny", revision=dataset.revision, total=len(SCORES),
                        processed=len(SCORES), status="completed", completed_at=utcnow())
        session.add(job)
        session.flush()
        for name, (mistaken, unique) in SCORES.items():
            findings = [{"kind": "class", "score": 0.8, "bbox": [0.5, 0.5, 0.2, 0.2], "label": 0, "classId": 0,
                         "predictedClass": 1}] if name == "train_0000.jpg" else [
                {"kind": "missing", "score": 0.4, "bbox": [0.3, 0.3, 0.1, 0.1], "predictedClass": 0}]
            session.add(ImageScore(dataset_id=dataset.id, key=keys[name], job_id=job.id, mistakenness=mistaken,
                                   uniqueness=unique, findings=findings, kinds={}))
        names = list(dataset.class_names)
    return {"class1": names[1], "class0": names[0], **keys}


def names_of(page) -> list[str]:
    return [t.select_one(".caption").get_text(" ", strip=True).split()[0] for t in thumbs(page)]


def scores_of(page) -> list[str]:
    return [text(t.select_one(".ds-score")) for t in thumbs(page)]


def test_sorting_by_mistakenness_pages_in_score_order_with_unscored_last(client, app, alice, tmp_path,
                                                                          monkeypatch):
    base = add_dataset(app, tmp_path)
    seeded = seed_scores(app)
    monkeypatch.setattr(dataset_pages, "PER_PAGE", 4)
    sign_in(client)
    expected = by_mistake(seeded)
    first = soup(client.get(f"{base}?sort=mistakenness-desc"))
    assert grid_count(first) == IMAGES and names_of(first) == expected[:4]
    assert first.select_one("#f-sort option[selected]")["value"] == "mistakenness-desc"
    assert scores_of(first)[expected.index("train_0000.jpg")] == (
        f"mistake 0.95 · wrong class? (model: {seeded['class1']})")
    assert scores_of(first)[2] == f"mistake 0.70 · missing box? ({seeded['class0']})"
    assert "1 = the Review queue" in first.select_one(".ds-score")["title"]
    next_link = first.select_one("#ds-grid a[rel=next]")["href"]
    assert next_link == f"{base}?sort=mistakenness-desc&page=2"  # the order is in the URL: linkable, paged
    order = text(first.select_one("#ds-scores-order"))
    assert "Likeliest label mistakes first" in order and "(1 in the dataset" in order and "come last" in order
    note = first.select_one("#ds-scores-note")
    assert note["data-scores"] == "stale" and "10 of 11 images scored" in text(note)
    assert note.select_one(f"a[href='{base}/review']") is not None

    pages = [names_of(soup(client.get(f"{base}?sort=mistakenness-desc&page={n}",
                                      headers={"HX-Request": "true"}))) for n in (1, 2, 3)]
    assert [name for page in pages for name in page] == expected  # every image once, unscored last
    last = soup(client.get(f"{base}?sort=mistakenness-desc&page=3"))
    assert scores_of(last)[-1] == "not scored" and last.select_one("a[rel=next]") is None

    unique = [name for n in (1, 2, 3) for name in names_of(soup(client.get(f"{base}?sort=uniqueness-desc&page={n}")))]
    assert unique[:3] == ["train_0003.jpg", "train_0000.jpg", "train_0001.jpg"]
    rest = sorted(set(NAMES) - set(unique[:3]), key=seeded.__getitem__)
    assert unique[3:] == rest  # no uniqueness: last, by key
    assert scores_of(soup(client.get(f"{base}?sort=uniqueness-desc")))[0] == "unique 1.00"
    plain = soup(client.get(base))
    assert names_of(plain) == NAMES[:4] and not plain.select(".ds-score")  # the grid's own order


def test_possible_mistakes_only_combines_with_the_filters_and_the_map_selection(client, app, alice, tmp_path,
                                                                                 monkeypatch):
    base = add_dataset(app, tmp_path)
    keys = seed_scores(app)
    sign_in(client)
    top = soup(client.get(f"{base}?mistakes=1"))  # the top tenth of 10 scored: 1 image, and the one tied with it
    assert grid_count(top) == 2 and names_of(top) == ["train_0000.jpg", "val_0001.jpg"]  # by name
    assert top.select_one("#f-mistakes").has_attr("checked")
    assert all(s.startswith("mistake 0.95") for s in scores_of(top))
    assert "top 10 %" in text(top.select_one("#ds-scores-order"))
    assert names_of(soup(client.get(f"{base}?mistakes=1&split=val"))) == ["val_0001.jpg"]
    assert grid_count(soup(client.get(f"{base}?mistakes=1&labeled=no"))) == 0
    token = token_of(client.get(f"{base}/map").text)
    chosen = [keys["train_0000.jpg"], keys["train_0003.jpg"], keys["bare.jpg"]]
    made = client.post(f"{base}/map/selection", json={"keys": chosen}, headers={"X-CSRFToken": token}).json()
    lasso = soup(client.get(f"{made['url']}&mistakes=1&sort=mistakenness-desc"))
    assert names_of(lasso) == ["train_0000.jpg"] and text(lasso.select_one("#ds-selection-count")) == "3 images"
    assert names_of(soup(client.get(f"{made['url']}&sort=mistakenness-desc"))) == [
        "train_0000.jpg", "train_0003.jpg", "bare.jpg"]

    monkeypatch.setattr(dataset_pages, "PER_PAGE", 1)
    first = soup(client.get(f"{base}?mistakes=1&sort=mistakenness-desc"))
    assert text(first.select_one("#grid-count")) == "2 images match the filters · page 1 of 2"
    assert first.select_one("a[rel=next]")["href"] == f"{base}?mistakes=1&sort=mistakenness-desc&page=2"
    second = names_of(soup(client.get(f"{base}?mistakes=1&sort=mistakenness-desc&page=2")))
    assert names_of(first) + second == by_mistake(keys)[:2]


def test_without_scores_the_choices_are_disabled_and_lead_to_the_review_page(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    page = soup(client.get(f"{base}?sort=mistakenness-desc&mistakes=1"))
    assert grid_count(page) == IMAGES and names_of(page) == NAMES  # the parameters do nothing yet
    options = {o["value"]: o for o in page.select("#f-sort option")}
    assert options["mistakenness-desc"].has_attr("disabled") and options["uniqueness-desc"].has_attr("disabled")
    assert page.select_one("#f-mistakes").has_attr("disabled") and not page.select(".ds-score")
    note = page.select_one("#ds-scores-note")
    assert note["data-scores"] == "none" and "No review scores yet" in text(note)
    assert page.select_one("#ds-scores-get")["href"] == f"{base}/review"
    assert client.get(f"{base}/review").status_code == 200  # where it leads: its button computes them


def test_an_outsider_reading_a_public_dataset_gets_no_scores_and_no_score_order(client, app, alice, bob,
                                                                                tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")
    seed_scores(app)
    sign_in(client)  # its owner sees them on the very URL
    assert soup(client.get(f"{base}?sort=mistakenness-desc&mistakes=1")).select(".ds-score")
    client.cookies.clear()
    sign_in(client, "bob")
    page = soup(client.get(f"{base}?sort=mistakenness-desc&mistakes=1"))
    assert page.select_one("#f-sort") is None and page.select_one("#f-mistakes") is None
    assert page.select_one("#ds-scores-note") is None and page.select_one("#ds-scores-order") is None
    assert grid_count(page) == IMAGES and names_of(page) == NAMES  # ignored: nothing to infer
    assert not page.select(".ds-score") and "mistake" not in page.get_text().lower()
    fragment = client.get(f"{base}?sort=uniqueness-desc&mistakes=1", headers={"HX-Request": "true"})
    assert names_of(soup(fragment)) == NAMES and "ds-score" not in fragment.text


def test_a_team_viewer_sorts_by_fresh_scores_without_the_review_pages_link(client, app, make_account, tmp_path):
    """Team acme: olga owner, vic viewer. The scores are the team's to read (as on the map); only an editor
    computes them, so vic is not offered to compute them (the Review page is read-only to him)."""
    for name in ("olga", "vic"):
        make_account(name, password=PASSWORD)
    with app.state.lanner.db.session() as session:
        olga = Principal.of(accounts.require_user(session, username="olga"))
        teams_service.create_team(session, name="acme", owner=accounts.require_user(session, username="olga"))
        teams_service.add_member(session, olga, "acme", "vic", "viewer")
        project = projects_service.create_project(session, olga, slug="shapes", name="shapes", owner="acme")
        model = projects_service.create_model(session, project, name="tiny")
        model.weights_sha256, model.task, model.status = "e" * 64, "detect", "completed"
        session.commit()
        session.expunge(model)
    base = add_dataset(app, tmp_path, username="olga", owner="acme")
    keys = seed_scores(app, "acme", model)
    sign_in(client, "vic")
    page = soup(client.get(f"{base}?sort=mistakenness-desc"))
    assert names_of(page) == by_mistake(keys) and scores_of(page)[-1] == "not scored"
    note = page.select_one("#ds-scores-note")
    assert note["data-scores"] == "fresh" and "fresh" in text(note) and not note.select(f"a[href='{base}/review']")
    review = soup(client.get(f"{base}/review"))  # read-only: he reads the scores, an editor computes them
    assert review.select_one("#review-read-only") and review.select_one("#review-compute") is None
    with app.state.lanner.db.session() as session:  # without scores he is told who computes them
        session.execute(delete(ReviewJob))
    note = soup(client.get(base)).select_one("#ds-scores-note")
    assert "an editor of this dataset can compute them" in text(note) and not note.select("a")
