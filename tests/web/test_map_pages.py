"""The dataset map page in-process: reached from the dataset page, it leads from "no embeddings" through the job's
progress to the map's points (columns, colour-by fields); a lasso's selection is stored and filters the grid,
and is its maker's alone. The layout is stored as the embedding queue stores one (``maps.pack``), from a known
placement, so no UMAP runs here (tests/embeddings/test_clustering.py covers computing it); the browser test
(test_map_browser.py) draws it."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from lanner.datasets.models import DatasetItem, ImageSelection
from lanner.db import utcnow
from lanner.embeddings import jobs, maps
from lanner.embeddings.models import EmbeddingJob, EmbeddingLayout
from lanner.projects.models import ModelRecord
from tests.training.fakes import FakeExecutor
from tests.web.pages import sign_in, soup, text, token_of
from tests.web.test_dataset_pages import TRAIN, VAL, add_dataset, thumbs
from tests.web.test_similar_pages import DIGEST, _dataset, embed, model_of

IMAGES = TRAIN + VAL + 2


@pytest.fixture(autouse=True)
def no_worker_processes(app) -> None:
    """The analyses and review jobs these pages make go to fake executors. A real worker, launched by the queue the
    new job wakes, would outlive the test (workers outlive their server by design, to be found again after a
    restart) and retry its links to the unreachable ``testserver`` for three minutes."""
    app.state.embeddings._executor = FakeExecutor()
    app.state.review._executor = FakeExecutor()


def queue_job(app, owner: str = "alice", slug: str = "shapes") -> str:
    """A queued analysis, as ``POST .../embeddings`` leaves one."""
    with app.state.lanner.db.session() as session:
        dataset = _dataset(session, owner, slug)
        job = jobs.create(session, EmbeddingJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_sha256=DIGEST,
                                                model_label="test", revision=dataset.revision, imgsz=64, total=IMAGES))
        return job.id


def store_layout(app, owner: str = "alice", slug: str = "shapes") -> dict[str, tuple[float, float]]:
    """A completed analysis and its map: image ``n`` (by name) at (n, -n), cluster n % 2. Returns key -> point."""
    ids = embed(app, owner, slug)
    with app.state.lanner.db.session() as session:
        dataset = _dataset(session, owner, slug)
        rows = session.execute(select(DatasetItem.key, DatasetItem.sha256, DatasetItem.name)
                               .where(DatasetItem.manifest_id == dataset.manifest_id)
                               .order_by(DatasetItem.name)).all()
        hashes = list(dict.fromkeys(r.sha256 for r in rows))
        xy = np.array([[n, -n] for n in range(len(hashes))], np.float32)
        session.add(EmbeddingLayout(dataset_id=dataset.id, model_sha256=DIGEST, revision=dataset.revision,
                                    count=len(hashes), data=maps.pack(hashes, xy, np.arange(len(hashes)) % 2),
                                    computed_at=utcnow()))
        at = {sha: n for n, sha in enumerate(hashes)}
        assert len(ids) == IMAGES
        return {r.key: (float(at[r.sha256]), -float(at[r.sha256])) for r in rows}


def test_the_map_is_a_click_from_the_dataset_and_leads_from_no_embeddings_to_points(client, app, alice,
                                                                                     tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    page = soup(client.get(base))
    assert page.select_one("#map-link")["href"] == f"{base}/map"

    page = soup(client.get(f"{base}/map"))  # no model on the server: what is needed, not a button that fails
    assert page.select_one("#map-view")["data-state"] == "none" and not page.select_one("#map-compute")
    missing = page.select_one("#map-no-model")
    assert "No model on this server can embed this dataset" in text(missing)
    assert missing.select_one("a")["href"] == "/train?dataset=ul%3A%2F%2Falice%2Fdatasets%2Fshapes"
    assert "lanner models add-official yolo26n.pt" in text(missing.select_one("code"))

    model_of(app, alice, tmp_path, "tiny")  # a model: a button that computes them, back here
    page = soup(client.get(f"{base}/map"))
    assert page.select_one("#map-view")["data-state"] == "none" and not page.select_one("#map-none").has_attr("hidden")
    form = page.select_one("#map-compute")
    assert form["action"] == f"{base}/embeddings" and form.select_one("[name=next]")["value"] == f"{base}/map"
    assert client.get(f"{base}/map/points").json()["state"] == "none"

    queue_job(app)  # what the button starts: the page follows its progress
    page = soup(client.get(f"{base}/map"))
    assert page.select_one("#map-view")["data-state"] == "embedding"
    assert not page.select_one("#map-progress").has_attr("hidden")
    waiting = client.get(f"{base}/map/points").json()
    assert waiting["state"] == "embedding" and waiting["job"]["status"] == "queued"

    placed = store_layout(app)
    with app.state.lanner.db.session() as session:  # the job ends as the queue ends one
        job = session.scalar(select(EmbeddingJob).where(EmbeddingJob.status.in_(jobs.ACTIVE)))  # queued, or
        # already launched by the queue the new job woke
        jobs.new_attempt(job)
        assert jobs.launched(session, job, external_id="test", executor="test") and jobs.running(session, job)
        assert jobs.complete(session, job)
    assert soup(client.get(f"{base}/map")).select_one("#map-view")["data-state"] == "loading"
    body = client.get(f"{base}/map/points").json()
    assert body["state"] == "ready" and body["count"] == IMAGES and body["missing"] == 0 and not body["stale"]
    assert len(body["keys"]) == len(body["x"]) == len(body["y"]) == IMAGES
    assert [(x, y) for x, y in zip(body["x"], body["y"], strict=True)] == [placed[k] for k in body["keys"]]
    fields = {f["name"]: f for f in body["fields"]}
    assert set(fields) == {"cluster", "split", "class", "labelled", "labels"}
    assert all(len(f.get("codes") or f.get("values")) == IMAGES for f in fields.values())
    assert fields["labels"]["kind"] == "number" and fields["labels"]["unit"] == "labels per image"
    unlabelled = fields["labelled"]["codes"].count(1)
    assert unlabelled == 1  # bare.jpg: the one image without a label file
    assert fields["class"]["names"][-2:] == ["Several classes", "No class"]


def test_a_lasso_selection_filters_the_grid_and_is_its_makers_alone(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")  # bob may read it, not her selection
    placed = store_layout(app)
    sign_in(client)
    token = token_of(client.get(f"{base}/map").text)
    chosen = sorted(placed)[:3]
    made = client.post(f"{base}/map/selection", json={"keys": chosen + ["nosuchkey"]}, headers={"X-CSRFToken": token})
    assert made.status_code == 200, made.text
    assert made.json()["count"] == 3 and made.json()["url"] == f"{base}?sel={made.json()['id']}"
    page = soup(client.get(made.json()["url"]))
    assert {li.select_one(".ds-select")["value"].split("-")[-1] for li in thumbs(page)} == set(chosen)
    assert text(page.select_one("#ds-selection-count")) == "3 images"
    assert page.select_one("#ds-bulk-move") is not None  # the grid's bulk actions apply to them
    train_only = soup(client.get(made.json()["url"] + "&split=val"))  # and its filters on top
    assert len(thumbs(train_only)) < 3 or all(li["data-split"] == "val" for li in thumbs(train_only))
    assert client.post(f"{base}/map/selection", json={"keys": []},
                       headers={"X-CSRFToken": token}).status_code == 400
    assert client.post(f"{base}/map/selection", data={"csrf_token": token}).status_code == 400  # not its JSON

    sign_in(client, "bob")
    assert client.get(made.json()["url"]).status_code == 404  # her selection, his visit: as if none existed
    assert client.get(f"{base}?sel=nosuchselection").status_code == 404
    assert client.get(f"{base}/map/points").json()["state"] == "ready"  # her public dataset's map he may see
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(ImageSelection.count).where(ImageSelection.id == made.json()["id"])) == 3


def test_a_private_datasets_map_answers_404_to_anyone_else(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path)
    store_layout(app)
    sign_in(client, "bob")
    token = token_of(client.get("/datasets").text)
    assert client.get(f"{base}/map").status_code == 404
    assert client.get(f"{base}/map/points").status_code == 404
    assert client.post(f"{base}/map/selection", json={"keys": ["a"]}, headers={"X-CSRFToken": token}
                       ).status_code == 404
    assert client.post(f"{base}/map/selection", data={"csrf_token": token}).status_code == 404  # any body


def test_the_review_scores_colour_the_map_and_an_unscored_image_has_no_value(client, app, alice, tmp_path):
    """Once the Review queue scored a dataset, its map can be coloured by mistakenness and uniqueness (number
    fields in the points' order); an image the job did not score (here: all but three) has null, which the page
    greys. Without scores there is no such field (the first test)."""
    from lanner.review import jobs as review_jobs
    from lanner.review.models import ImageScore, ReviewJob

    base = add_dataset(app, tmp_path)
    placed = store_layout(app)
    scored = dict(zip(sorted(placed)[:3], [(0.9, 0.2), (0.1, None), (0.5, 1.0)], strict=True))
    with app.state.lanner.db.session() as session:
        dataset = _dataset(session, "alice", "shapes")
        job = review_jobs.create(session, ReviewJob(dataset_id=dataset.id, owner_id=dataset.owner_id,
                                                    model_sha256=DIGEST, model_label="test",
                                                    revision=dataset.revision, total=3))
        for key, (mistaken, unique) in scored.items():
            session.add(ImageScore(dataset_id=dataset.id, key=key, job_id=job.id, mistakenness=mistaken,
                                   uniqueness=unique))
    sign_in(client)
    body = client.get(f"{base}/map/points").json()
    fields = {f["name"]: f for f in body["fields"]}
    assert fields["mistakenness"]["kind"] == fields["uniqueness"]["kind"] == "number"
    assert "Review queue" in fields["mistakenness"]["unit"]
    by_key = dict(zip(body["keys"], zip(fields["mistakenness"]["values"], fields["uniqueness"]["values"],
                                        strict=True), strict=True))
    assert {key: by_key[key] for key in scored} == scored
    assert all(value == (None, None) for key, value in by_key.items() if key not in scored)


def test_the_compute_form_offers_the_models_the_visitor_may_pick_and_starts_with_the_one_picked(
        client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path)
    mine = model_of(app, alice, tmp_path, "mine")
    newest = model_of(app, alice, tmp_path, "newest")
    with app.state.lanner.db.session() as session:  # trained on this dataset: the automatic pick
        session.get(ModelRecord, newest).train_args = {"data": "ul://alice/datasets/shapes"}
    secret = model_of(app, bob, tmp_path, "secret")
    token = sign_in(client)
    field = soup(client.get(f"{base}/map")).select_one("#map-compute select#map-model")
    assert field["name"] == "model" and text(field.find_previous("label")) == "Model to embed with"
    options = {o["value"]: text(o) for o in field.select("option")}
    assert options == {"auto": "Automatic (newest trained on this dataset): ul://alice/models/newest",
                       newest: "ul://alice/models/newest", mine: "ul://alice/models/mine"}  # not bob's
    assert field.select_one("option[selected]")["value"] == "auto"

    answer = client.post(f"{base}/embeddings", data={"csrf_token": token, "next": f"{base}/map", "model": secret})
    assert answer.status_code == 404  # another user's private model
    answer = client.post(f"{base}/embeddings", data={"csrf_token": token, "next": f"{base}/map", "model": mine},
                         follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == f"{base}/map"
    with app.state.lanner.db.session() as session:
        job = session.scalar(select(EmbeddingJob).where(EmbeddingJob.status.in_(jobs.ACTIVE)))  # queued, or
        # already launched by the queue the new job woke
        assert (job.model_id, job.chosen) == (mine, True)
        assert jobs.cancel(session, job)
    page = soup(client.get(base))  # the dataset page's form: the dataset's model, the one picked, selected
    assert page.select_one("#embedding-health-start #embedding-model option[selected]")["value"] == mine
    assert soup(client.get(f"{base}/map")).select_one("#map-model option[selected]")["value"] == mine
