"""The "Similar" strip (image page, editor fragment), the button that starts an analysis and its progress, and the
embedding findings of the dataset page's health section, in-process.

Vectors are written as the worker's delivery stores them (``ImageEmbedding`` rows under one model digest, an
``EmbeddingJob`` completed), chosen by hand so the expected neighbours and findings are known; the worker itself
is covered in tests/embeddings."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select

from lanner.accounts.models import User
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import utcnow
from lanner.embeddings import health, index, jobs
from lanner.embeddings.models import EmbeddingJob, ImageEmbedding
from lanner.training.executors.base import JobState
from tests.embeddings.conftest import finish, launch, settings  # noqa: F401 (settings: the queue off)
from tests.trained import attach_weights
from tests.web.pages import sign_in, soup, text
from tests.web.test_dataset_pages import add_dataset

DIGEST = "d" * 64
DIM = 16
HTMX = {"HX-Request": "true"}


def _dataset(session, owner: str, slug: str) -> Dataset:
    return session.scalar(select(Dataset).join(User, User.id == Dataset.owner_id)
                          .where(User.username == owner, Dataset.slug == slug))


def model_of(app, account, tmp_path, name: str, *, project: str = "models") -> str:
    """A detection model of ``account``'s with weights (bytes no test loads): one to embed with; its id."""
    weights = tmp_path / f"{account.username}-{name}.pt"
    weights.write_bytes(f"weights of {account.username}/{name}".encode())
    return attach_weights(app, account, weights, project=project, model=name)


def embed(app, owner: str, slug: str, vector_of=None) -> dict[str, str]:
    """Vectors for every image of ``owner/slug`` (``vector_of(name) -> array``, else seeded random) and a
    completed analysis; returns name -> image id."""
    with app.state.lanner.db.session() as session:
        dataset = _dataset(session, owner, slug)
        rows = session.execute(select(DatasetItem.key, DatasetItem.name, DatasetItem.sha256)
                               .where(DatasetItem.manifest_id == dataset.manifest_id)
                               .order_by(DatasetItem.name)).all()
        known = set(session.scalars(select(ImageEmbedding.image_sha256).where(ImageEmbedding.model_sha256 == DIGEST)))
        for row in rows:
            if row.sha256 in known:
                continue
            known.add(row.sha256)
            seed = int(row.sha256[:8], 16)
            vector = vector_of(row.name) if vector_of else np.random.default_rng(seed).normal(size=DIM)
            vector = np.asarray(vector, np.float32) / np.linalg.norm(vector)
            session.add(ImageEmbedding(model_sha256=DIGEST, image_sha256=row.sha256, dim=DIM,
                                       vector=vector.astype(np.float32).tobytes()))
        session.add(EmbeddingJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_sha256=DIGEST,
                                 model_label="test", revision=dataset.revision, imgsz=64, status=jobs.COMPLETED,
                                 total=len(known), processed=len(known), completed_at=utcnow()))
        return {row.name: f"{dataset.id}-{row.key}" for row in rows}


def strip_links(page) -> list[str]:
    return [a["href"] for a in page.select("#similar-strip #similar-list a.similar-link")]


def test_the_strip_shows_the_nearest_images_the_visitor_may_read(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path)
    add_dataset(app, tmp_path / "b", username="bob", slug="secret")  # the same images, bob's and private
    ids = embed(app, "alice", "shapes")
    bob_ids = embed(app, "bob", "secret")
    sign_in(client)
    page = soup(client.get(f"{base}/images/{ids['train_0002.jpg']}"))
    links = strip_links(page)
    assert 1 <= len(links) <= 8
    assert all(link.startswith("/datasets/alice/shapes/images/") for link in links)  # never bob's private set
    assert f"{base}/images/{ids['train_0002.jpg']}" not in links  # not the image itself
    scores = [float(text(s).split()[0]) for s in page.select("#similar-list .similar-score")]
    assert all(text(s).endswith("cosine") for s in page.select("#similar-list .similar-score"))
    assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
    assert page.select_one("#similar-start") is None  # analysed: no button
    target = soup(client.get(links[0]))  # the link opens that image's page
    assert target.select_one("h1") and text(target.select_one("h1")) in {
        text(a.select_one("img").parent.parent.select_one(".caption span:last-child"))
        for a in page.select("#similar-list li")}

    sign_in(client, "bob")  # bob's strip shows bob's images only
    bob_page = soup(client.get(f"/datasets/bob/secret/images/{bob_ids['train_0002.jpg']}"))
    assert strip_links(bob_page) and all(link.startswith("/datasets/bob/secret/") for link in strip_links(bob_page))


def test_a_public_dataset_of_another_user_is_searched_too(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path)
    add_dataset(app, tmp_path / "b", username="bob", slug="open", visibility="public")
    ids = embed(app, "alice", "shapes")
    embed(app, "bob", "open")
    sign_in(client)
    links = strip_links(soup(client.get(f"{base}/images/{ids['train_0002.jpg']}")))
    assert any(link.startswith("/datasets/bob/open/images/") for link in links)


def test_without_embeddings_the_strip_offers_the_analysis_to_writers_only(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")
    with app.state.lanner.db.session() as session:
        dataset = _dataset(session, "alice", "shapes")
        key = session.scalar(select(DatasetItem.key).where(DatasetItem.manifest_id == dataset.manifest_id).limit(1))
    sign_in(client)
    page = soup(client.get(f"{base}/images/{dataset.id}-{key}"))
    assert page.select_one("#similar-strip")["data-state"] == "missing"
    assert "no embeddings yet" in text(page.select_one("#similar-message"))
    form = page.select_one("form#similar-start")
    assert form["action"] == f"{base}/embeddings" and form.select_one("[name=next]")["value"].endswith(key)
    # no model to embed with: the page says what to do, and it comes back to the image
    answer = client.post(f"{base}/embeddings", data={"csrf_token": page.select_one("[name=csrf_token]")["value"],
                                                   "next": f"{base}/images/{dataset.id}-{key}"},
                         follow_redirects=True)
    assert answer.url.path == f"{base}/images/{dataset.id}-{key}" and "lanner models add-official" in answer.text

    sign_in(client, "bob")  # may read the public dataset, may not start its analysis
    seen = soup(client.get(f"{base}/images/{dataset.id}-{key}"))
    assert seen.select_one("#similar-start") is None and seen.select_one("#similar-ask")
    assert client.post(f"{base}/embeddings", data={"csrf_token": seen.select_one("[name=csrf_token]")["value"]},
                       follow_redirects=False).status_code == 403


def test_the_button_starts_the_analysis_and_the_strip_shows_its_progress(client, app, alice, tmp_path,
                                                                         tiny_weights):
    base = add_dataset(app, tmp_path)
    model_id = attach_weights(app, alice, tiny_weights)
    from lanner.projects.models import ModelRecord
    with app.state.lanner.db.session() as session:
        session.get(ModelRecord, model_id).train_args = {"data": "ul://alice/datasets/shapes", "imgsz": 64}
        dataset = _dataset(session, "alice", "shapes")
        key = session.scalar(select(DatasetItem.key).where(DatasetItem.manifest_id == dataset.manifest_id).limit(1))
    sign_in(client)
    image = f"{base}/images/{dataset.id}-{key}"
    token = soup(client.get(image)).select_one("[name=csrf_token]")["value"]
    answer = client.post(f"{base}/embeddings", data={"csrf_token": token, "next": image}, follow_redirects=True)
    assert answer.url.path == image and "The analysis has started" in answer.text
    page = soup(answer)
    strip = page.select_one("#similar-strip")
    assert strip["data-state"] == "running" and strip["hx-get"] == f"{base}/similar/{key}"
    assert "waiting for a worker" in text(page.select_one("#similar-progress"))
    with app.state.lanner.db.session() as session:
        job = session.scalar(select(EmbeddingJob).where(EmbeddingJob.dataset_id == dataset.id))
    launch(app, job.id)
    with app.state.lanner.db.session() as session:  # half delivered, as a worker's pages would
        job = session.get(EmbeddingJob, job.id)
        job.processed = 4
    polled = soup(client.get(f"{base}/similar/{key}", headers=HTMX))
    assert polled.select_one("#similar-strip")["data-state"] == "running"
    assert "4 of 9 images" in text(polled.select_one("#similar-progress"))
    assert polled.select_one("progress")["value"] == "4"
    editor = soup(client.get(f"{base}/similar/{key}?editor=1", headers=HTMX))
    assert editor.select_one("#similar-strip")["hx-get"] == f"{base}/similar/{key}?editor=1"
    finish(app, job.id, JobState.FAILED)
    done = soup(client.get(f"{base}/similar/{key}", headers=HTMX))  # over: the button again, no poll
    assert done.select_one("#similar-strip").get("hx-get") is None and done.select_one("#similar-start")
    assert client.get(f"{base}/similar/{key}", follow_redirects=False).headers["location"] == image


def test_the_editor_fragment_and_who_may_read_it(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path)
    ids = embed(app, "alice", "shapes")
    key = ids["train_0003.jpg"].split("-")[1]
    sign_in(client)
    fragment = soup(client.get(f"{base}/similar/{key}?editor=1", headers=HTMX))
    assert fragment.select_one("#similar-strip")["data-state"] == "ready" and strip_links(fragment)
    editor = soup(client.get(f"{base}/annotate/{key}"))
    assert editor.select_one("#an-similar-panel #similar-strip")
    assert client.get(f"{base}/similar/nope!", headers=HTMX).status_code == 404
    sign_in(client, "bob")
    assert client.get(f"{base}/similar/{key}", headers=HTMX).status_code == 404


def synthetic() -> tuple[list[str], np.ndarray]:
    """Five crowds of eight images (cosine about 0.8 within a crowd), a near-copy of image 0 (digest ``dup``) and
    one image unlike any other (``odd``)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(5, DIM))
    crowd = np.repeat(centres, 8, axis=0) + 0.45 * rng.normal(size=(40, DIM))
    matrix = np.vstack([crowd, crowd[0] + 0.01 * rng.normal(size=DIM), 3 * rng.normal(size=DIM)])
    return [f"{i:064x}" for i in range(40)] + ["dup", "odd"], matrix.astype(np.float32)


def test_health_finds_near_duplicates_and_outliers_in_synthetic_vectors():
    hashes, matrix = synthetic()
    found = health.findings(index.DatasetIndex(hashes, *index.build(matrix)))
    assert found["near_duplicate"]["count"] == 2
    [pair] = found["near_duplicate"]["pairs"]
    assert set(pair["hashes"]) == {hashes[0], "dup"} and pair["cosine"] > 0.99
    assert found["outlier"]["images"][0]["hash"] == "odd" and found["outlier"]["images"][0]["z"] > 3.5
    assert found["outlier"]["count"] == 1
    crowds_only = health.findings(index.DatasetIndex(hashes[:40], *index.build(matrix[:40])))
    assert crowds_only["near_duplicate"]["count"] == 0 and crowds_only["outlier"]["count"] == 0


def test_the_dataset_page_shows_the_embedding_findings_with_links(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    before = soup(client.get(base)).select_one("#embedding-health")  # no model to embed with: what to do
    assert before["data-state"] == "none" and not before.select_one("form#embedding-health-start")
    assert before.select_one("#embedding-no-model a")["href"].startswith("/train?dataset=")
    model_of(app, alice, tmp_path, "tiny")
    before = soup(client.get(base)).select_one("#embedding-health")
    assert before["data-state"] == "none" and before.select_one("form#embedding-health-start #embedding-model")
    hashes, matrix = synthetic()
    # train_0002 is a near-copy of train_0000 by its vector (other bytes), val_0002 the odd one
    # two crowds (the index centres vectors on the dataset's mean: one crowd alone would be noise around it);
    # train_0002 is a near-copy of train_0000 by its vector (other bytes), val_0002 the odd one. copy.jpg has
    # train_0000's bytes and comes first by name (a vector is stored once per bytes).
    crowd_of = {"copy.jpg": 0, "train_0002.jpg": 40, "train_0003.jpg": 2, "train_0004.jpg": 3, "bare.jpg": 8,
                "train_0005.jpg": 9, "val_0000.jpg": 10, "val_0001.jpg": 11, "val_0002.jpg": 41}
    ids = embed(app, "alice", "shapes", lambda name: matrix[crowd_of[name]])
    page = soup(client.get(base))
    section = page.select_one("#embedding-health")
    assert section["data-state"] == "fresh"
    assert text(page.select_one("#embedding-near-count")) == "2"
    near = {a["href"] for a in page.select("#embedding-near a")}
    assert near == {f"{base}/images/{ids['copy.jpg']}", f"{base}/images/{ids['train_0002.jpg']}"}
    assert "cosine" in text(page.select_one("#embedding-near li"))
    # nine images are too few to call one far from its five nearest (the unit test above finds it among 42)
    outliers = [a["href"] for a in page.select("#embedding-outliers a")]
    assert text(page.select_one("#embedding-outlier-count")) == str(len(outliers))
    assert set(outliers) <= {f"{base}/images/{i}" for i in ids.values()}


def test_a_large_dataset_gets_its_findings_when_its_analysis_ends_not_from_a_page(client, app, alice, tmp_path,
                                                                                  monkeypatch):
    base = add_dataset(app, tmp_path)
    model_of(app, alice, tmp_path, "tiny")
    embed(app, "alice", "shapes")
    monkeypatch.setattr(health, "LIVE_MAX", 0)  # every dataset is "large"
    monkeypatch.setattr(health, "_memo", {})
    sign_in(client)
    page = soup(client.get(base))
    assert page.select_one("#embedding-health")["data-state"] == "pending"
    assert page.select_one("form#embedding-health-start")  # analysing again computes them
    with app.state.lanner.db.session() as session:
        dataset = _dataset(session, "alice", "shapes")
    health.warm(app.state.lanner, dataset.id, DIGEST)  # what the queue does when a job completes
    monkeypatch.setattr(health, "_memo", {})  # a second process: the file beside the indexes answers
    assert soup(client.get(base)).select_one("#embedding-health")["data-state"] == "fresh"
