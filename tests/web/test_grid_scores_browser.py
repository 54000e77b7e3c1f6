"""The dataset grid sorted and filtered by the review scores in a real browser against a real server (issue 31):
the owner picks "Likeliest label mistakes first" (the grid follows, the URL keeps it, each thumbnail says its
score and why, the unscored image last), then ticks "Possible mistakes only"; a dataset without scores offers
the choices disabled with the way to the Review page. The scores are written as a completed job leaves them (the
Review test, test_review_browser.py, computes real ones with a real worker). Fails on any browser error (see
``conftest.page``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from lanner import models_registry  # noqa: F401  (every table)
from lanner.accounts.models import User
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import utcnow
from lanner.review.models import ImageScore, ReviewJob
from lanner.synthetic import make_detection_dataset
from tests.web.conftest import WebServer, screenshot, signed_in

pytestmark = pytest.mark.browser
TRAIN, VAL = 5, 3
# name -> mistakenness (val_0002 has none: added after the job, say); the top tenth of 7 scored is 1 image
SCORES = {"train_0003.jpg": 0.93, "val_0001.jpg": 0.71, "train_0000.jpg": 0.42, "train_0004.jpg": 0.3,
          "val_0000.jpg": 0.18, "train_0001.jpg": 0.07, "train_0002.jpg": 0.0}


@pytest.fixture(scope="module")
def scored(web_server: WebServer, tmp_path_factory: pytest.TempPathFactory) -> WebServer:
    root = tmp_path_factory.mktemp("boxes")
    for slug in ("boxes", "plain"):
        data = make_detection_dataset(root / slug, train=TRAIN, val=VAL, size=64, seed=3)
        web_server.user("alice")
        web_server.cli("datasets", "import", str(data.parent), "--owner", "alice", "--name", slug)
    with web_server.db.session() as session:
        dataset = session.scalar(select(Dataset).join(User, User.id == Dataset.owner_id)
                                 .where(User.username == "alice", Dataset.slug == "boxes"))
        keys = dict(session.execute(select(DatasetItem.name, DatasetItem.key).where(
            DatasetItem.manifest_id == dataset.manifest_id)).all())
        job = ReviewJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_sha256="d" * 64,
                        model_label="ul://alice/boxes/tiny", revision=dataset.revision, total=len(SCORES),
                        processed=len(SCORES), status="completed", completed_at=utcnow())
        session.add(job)
        session.flush()
        for name, value in SCORES.items():
            finding = {"kind": "class", "score": value, "bbox": [0.5, 0.5, 0.2, 0.2], "label": 0, "classId": 0,
                       "predictedClass": 1}
            session.add(ImageScore(dataset_id=dataset.id, key=keys[name], job_id=job.id, mistakenness=value,
                                   uniqueness=None, findings=[finding] if value else [], kinds={}))
    return web_server


def test_sorting_by_likely_mistakes_then_filtering_to_them(page: Any, scored: WebServer) -> None:
    signed_in(page, scored.user("alice"), "/datasets/alice/boxes")
    expect(page.locator("#ds-scores-note")).to_contain_text("7 of 8 images scored")
    page.locator("#f-sort").select_option("mistakenness-desc")  # no button: the grid follows the choice
    page.wait_for_url(re.compile(r"sort=mistakenness-desc"))
    thumbs = page.locator("#ds-grid .ds-grid > li")
    expect(thumbs.first.locator(".caption")).to_have_text("train_0003.jpg")
    expect(thumbs.first.locator(".ds-score")).to_have_text(re.compile(r"^mistake 0\.93 · wrong class\? \(model: "))
    expect(thumbs.last.locator(".ds-score")).to_have_text("not scored")
    expect(thumbs.last.locator(".caption")).to_have_text("val_0002.jpg")
    expect(page.locator("#ds-scores-order")).to_contain_text("come last")
    assert page.locator("#ds-grid .caption").all_inner_texts() == [*SCORES, "val_0002.jpg"]
    page.locator("#ds-filters").evaluate("form => form.scrollIntoView()")
    screenshot(page, "dataset-grid-scores")

    page.locator("#f-mistakes").check()
    page.wait_for_url(re.compile(r"mistakes=1"))
    expect(thumbs).to_have_count(1)
    expect(page.locator("#grid-count")).to_have_text("1 image matches the filters")
    expect(thumbs.first.locator(".caption")).to_have_text("train_0003.jpg")
    page.locator("#ds-filters").evaluate("form => form.scrollIntoView()")
    screenshot(page, "dataset-grid-scores-mistakes")

    page.reload()  # the URL is the view: it comes back as it was
    expect(page.locator("#f-sort")).to_have_value("mistakenness-desc")
    expect(page.locator("#f-mistakes")).to_be_checked()
    expect(thumbs).to_have_count(1)


def test_without_scores_the_choices_say_how_to_get_them(page: Any, scored: WebServer) -> None:
    signed_in(page, scored.user("alice"), "/datasets/alice/plain")
    expect(page.locator("#f-mistakes")).to_be_disabled()
    expect(page.locator("#f-sort option[value=mistakenness-desc]")).to_be_disabled()
    page.locator("#ds-filters").evaluate("form => form.scrollIntoView()")
    screenshot(page, "dataset-grid-scores-none")
    page.locator("#ds-scores-get").click()
    page.wait_for_url("**/datasets/alice/plain/review")
    expect(page.locator("#review-state")).to_contain_text("No review scores yet")
