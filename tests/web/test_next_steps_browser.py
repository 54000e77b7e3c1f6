"""Every page leads to the next step (issue 31), walked in a real browser from the home page by clicks only: the
dataset -> "Review" (the Review page); the dataset's "Fed by ... from deployment" line -> the model page's
deployments; the nav's "Workflows" -> the list, whose deployment and dataset links lead back. "Auto-annotate"
without a model is shown disabled, its hint's link goes to the train dialog with the dataset chosen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import utcnow
from lanner.deployments.models import Deployment
from lanner.review.models import ImageScore, ReviewJob
from lanner.synthetic import make_detection_dataset
from lanner.workflows import service as workflows_service
from lanner.workflows.models import Workflow
from lanner.workflows.schemas import Collect
from tests.web.conftest import WebServer, a_run, screenshot, signed_in

pytestmark = pytest.mark.browser


def test_from_home_to_review_the_deployment_and_the_workflows(page: Any, web_server: WebServer,
                                                              tmp_path: Path) -> None:
    alice = web_server.user("alice")
    root = make_detection_dataset(tmp_path / "shapes", train=4, val=2, size=64, seed=4).parent
    web_server.cli("datasets", "import", str(root), "--owner", "alice", "--name", "shapes")
    model_id = a_run(web_server, alice, "tiny", 3, project="shapes")  # the model page the deployment belongs to
    with web_server.db.session() as session:  # a stopped endpoint of it, collecting into the dataset
        user = accounts_service.require_user(session, username="alice")
        deployment = Deployment(owner_id=user.id, model_id=model_id, project_slug="shapes", model_slug="tiny",
                                task="detect", slug="tiny-endpoint", name="Tiny endpoint", region="us-central1",
                                backend="local", status="stopped", weights_sha256="e" * 64, artefact_sha256="e" * 64)
        session.add(deployment)
        session.flush()
        _, errors = workflows_service.save_collect(session, Principal.of(user), deployment, Collect(
            deployment="tiny-endpoint", dataset="shapes", daily_cap=25), enabled=True)
        assert not errors, errors
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        job = ReviewJob(dataset_id=dataset.id, owner_id=user.id, model_sha256="d" * 64, model_label="alice/shapes/tiny",
                        revision=dataset.revision, total=3, processed=3, status="completed", completed_at=utcnow())
        session.add(job)
        session.flush()
        keys = session.scalars(select(DatasetItem.key).where(DatasetItem.manifest_id == dataset.manifest_id)
                               .order_by(DatasetItem.name).limit(3)).all()
        for key, (mistaken, unique) in zip(keys, [(1.0, 0.35), (0.62, 1.0), (0.18, None)], strict=True):
            session.add(ImageScore(dataset_id=dataset.id, key=key, job_id=job.id, mistakenness=mistaken,
                                   uniqueness=unique, findings=[{"kind": "missing", "score": mistaken,
                                                                 "bbox": [0.3, 0.3, 0.1, 0.1], "predictedClass": 0}]))

    signed_in(page, alice, "/")
    page.get_by_role("link", name="shapes", exact=True).first.click()
    page.wait_for_url("**/datasets/alice/shapes")
    auto = page.locator("#autolabel-open")
    expect(auto).to_be_disabled()
    expect(page.locator("#autolabel-missing")).to_contain_text("No detect model with weights that you can use yet")
    feeder = page.locator(".ds-feeder")
    expect(feeder).to_contain_text("Fed by 1 collect workflow from deployment Tiny endpoint "
                                   "(0 images today of the daily cap 25)")
    screenshot(page, "leadon-dataset")

    page.locator("#review-link").click()
    page.wait_for_url("**/datasets/alice/shapes/review")
    expect(page.locator("h1")).to_have_text("Review")
    expect(page.locator("#review-top thead")).to_contain_text("Mistakenness (0–1)")
    expect(page.locator("#review-scale")).to_contain_text("1 is the likeliest mistake here")
    screenshot(page, "leadon-review")
    page.get_by_role("link", name="shapes", exact=True).first.click()  # the header's way back
    page.wait_for_url("**/datasets/alice/shapes")

    feeder.get_by_role("link", name="Tiny endpoint").click()
    page.wait_for_url("**/alice/shapes/tiny#deployments-section")
    expect(page.locator('#deployments tr[data-slug="tiny-endpoint"]')).to_contain_text("Tiny endpoint")
    screenshot(page, "leadon-deployment")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Workflows").click()
    page.wait_for_url("**/workflows")
    row = page.locator("#workflow-list tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(1)).to_have_text("Collect uncertain detections")
    expect(row.locator("td").nth(5)).to_have_text("0 / 25")
    screenshot(page, "leadon-workflows")
    row.get_by_role("link", name="shapes").click()
    page.wait_for_url("**/datasets/alice/shapes")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Workflows").click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Collect uncertain: tiny-endpoint").click()
    expect(page.locator("#workflows-empty")).to_be_visible()
    expect(page.locator("#messages")).to_contain_text("it no longer collects")
    with web_server.db.session() as session:
        assert session.scalar(select(Workflow.active)) is False
