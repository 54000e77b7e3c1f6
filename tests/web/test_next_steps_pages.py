"""Every page leads to the next step (issue 31), in-process: the dataset page's "Review" button for whoever may
read the review scores (the owner, a team's viewer: a read-only Review page) and for no outsider of a public
dataset; "Auto-annotate" shown disabled with why and a link to train a model when no model has weights; the line
saying which deployment's collect workflow feeds the dataset (today's count of the cap, linked to the
deployment); the Workflows page listing the workspace's workflows with an editor's delete; and the units beside
the numbers (an outlier's robust z-score, the Review page's 0–1 scales)."""

from __future__ import annotations

from datetime import datetime

import numpy as np
from sqlalchemy import select

from lanner.accounts import service as accounts
from lanner.accounts.principal import Principal
from lanner.datasets.models import Dataset
from lanner.deployments.models import Deployment
from lanner.embeddings import health
from lanner.projects import service as projects_service
from lanner.teams import service as teams_service
from lanner.workflows import service as workflows_service
from lanner.workflows.models import Workflow
from lanner.workflows.schemas import Collect
from tests.web.pages import PASSWORD, sign_in, soup, text
from tests.web.test_dataset_pages import add_dataset
from tests.web.test_grid_scores_pages import seed_scores
from tests.web.test_similar_pages import embed, synthetic


def team_with_viewer(app, make_account) -> None:
    """Team acme: olga owner, vic viewer, a completed detect model with weights."""
    for name in ("olga", "vic"):
        make_account(name, password=PASSWORD)
    with app.state.lanner.db.session() as session:
        olga = Principal.of(accounts.require_user(session, username="olga"))
        teams_service.create_team(session, name="acme", owner=accounts.require_user(session, username="olga"))
        teams_service.add_member(session, olga, "acme", "vic", "viewer")


def deployment_feeding(app, owner: str, dataset_slug: str, *, cap: int = 50, today: int = 0,
                       name: str = "Tiny endpoint") -> str:
    """A deployment row of ``owner``'s (as ``deployments.service`` stores one; no process: the page reads rows)
    and its collect workflow saved through the deployment page's own service call; returns the workflow id."""
    with app.state.lanner.db.session() as session:
        user = accounts.require_user(session, username=owner)
        deployment = Deployment(owner_id=user.id, project_slug="shapes", model_slug="tiny", task="detect",
                                slug="tiny-endpoint", name=name, region="us-central1", backend="local",
                                status="ready", weights_sha256="e" * 64, artefact_sha256="e" * 64)
        session.add(deployment)
        session.flush()
        workflow, errors = workflows_service.save_collect(
            session, Principal.of(user), deployment, Collect(deployment=deployment.slug, dataset=dataset_slug,
                                                             daily_cap=cap), enabled=True)
        assert not errors, errors
        now: datetime = app.state.workflows.clock()
        workflow.captured_day, workflow.captured_today = now.date().isoformat(), today
        return workflow.id


def test_the_review_button_is_for_members_a_viewer_reads_the_review_page(client, app, alice, bob, make_account,
                                                                        tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")
    seed_scores(app)
    sign_in(client)
    link = soup(client.get(base)).select_one("#review-link")
    assert link is not None and link["href"] == f"{base}/review"
    review = soup(client.get(link["href"]))
    assert review.select_one("#review-start") and review.select_one("#review-read-only") is None
    client.cookies.clear()
    sign_in(client, "bob")  # reads the public dataset, outside its workspace: told nothing of scores
    assert soup(client.get(base)).select_one("#review-link") is None
    assert client.get(f"{base}/review").status_code == 404
    client.cookies.clear()

    team_with_viewer(app, make_account)
    team_base = add_dataset(app, tmp_path / "team", username="olga", owner="acme")
    seed_scores(app, "acme")
    sign_in(client, "vic")
    link = soup(client.get(team_base)).select_one("#review-link")
    assert link is not None and link["href"] == f"{team_base}/review"
    answer = client.get(link["href"])
    assert answer.status_code == 200
    page = soup(answer)
    assert page.select_one("#review-read-only") and len(page.select("#review-top tbody tr")) == 10
    assert not page.select("form") or all("/review" not in f.get("action", "") for f in page.select("form"))
    assert all("/annotate" not in a["href"] for a in page.select("#review-top a"))  # the image page: he reads
    assert page.select_one("#review-top a")["href"].startswith(f"{team_base}/images/")


def test_the_review_page_says_what_its_scores_mean(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    seed_scores(app)
    sign_in(client)
    page = soup(client.get(f"{base}/review"))
    headers = [text(th) for th in page.select("#review-top th")]
    assert "Mistakenness (0–1)" in headers and "Uniqueness (0–1)" in headers
    scale = text(page.select_one("#review-scale"))
    assert "0 to 1" in scale and "1 is the likeliest mistake" in scale and "1 is the most isolated image" in scale


def test_auto_annotate_without_a_model_is_shown_disabled_with_the_next_step(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    page = soup(client.get(base))
    button = page.select_one("#autolabel-open")
    assert button is not None and button.has_attr("disabled") and button["aria-describedby"] == "autolabel-missing"
    why = page.select_one("#autolabel-missing")
    assert "No detect model with weights" in text(why)
    assert page.select_one("#autolabel-train")["href"] == page.select_one("#train-link")["href"]
    assert page.select_one("#autolabel-dialog") is None  # nothing to pick from
    with app.state.lanner.db.session() as session:  # a model with weights: the dialog's button
        owner = Principal.of(accounts.require_user(session, username="alice"))
        project = projects_service.create_project(session, owner, slug="shapes", name="shapes")
        model = projects_service.create_model(session, project, name="tiny")
        model.weights_sha256, model.task, model.status = "e" * 64, "detect", "completed"
    page = soup(client.get(base))
    assert not page.select_one("#autolabel-open").has_attr("disabled") and page.select_one("#autolabel-dialog")
    assert page.select_one("#autolabel-missing") is None


def test_the_dataset_says_which_deployment_feeds_it_and_links_to_it(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")
    sign_in(client)
    assert soup(client.get(base)).select(".ds-feeder") == []
    deployment_feeding(app, "alice", "shapes", cap=50, today=7)
    page = soup(client.get(base))
    [line] = page.select(".ds-feeder")
    assert text(line).startswith("Fed by 1 collect workflow from deployment Tiny endpoint "
                                 "(7 images today of the daily cap 50)")
    links = {text(a): a["href"] for a in line.select("a")}
    assert links["Tiny endpoint"] == "/alice/shapes/tiny#deployments-section"
    assert links["its settings"] == "/alice/shapes/tiny/deployments/tiny-endpoint/collect"
    assert links["all workflows"] == "/workflows"
    client.cookies.clear()
    sign_in(client, "bob")  # an outsider reading the public dataset is told nothing of alice's deployments
    page = soup(client.get(base))
    assert page.select(".ds-feeder") == [] and "Tiny endpoint" not in page.get_text()


def test_the_workflows_page_lists_them_and_an_editor_deletes_one(client, app, alice, bob, tmp_path):
    add_dataset(app, tmp_path)
    workflow_id = deployment_feeding(app, "alice", "shapes", cap=40, today=3)
    token = sign_in(client)
    page = soup(client.get("/workflows"))
    assert page.select_one('header nav a[aria-current="page"]')["href"] == "/workflows"
    [row] = page.select("#workflow-list tbody tr")
    cells = [text(td) for td in row.select("td")]
    assert cells[:6] == ["Collect uncertain: tiny-endpoint", "Collect uncertain detections", "Tiny endpoint",
                         "shapes", "collecting", "3 / 40"]
    assert row.select_one("td:nth-of-type(4) a")["href"] == "/datasets/alice/shapes"
    assert row.select_one("td:nth-of-type(3) a")["href"] == "/alice/shapes/tiny#deployments-section"
    client.cookies.clear()
    bob_token = sign_in(client, "bob")
    assert soup(client.get("/workflows")).select_one("#workflows-empty") is not None
    refused = client.post(f"/workflows/{workflow_id}/delete", data={"csrf_token": bob_token}, follow_redirects=False)
    assert refused.status_code == 404
    assert client.get("/workflows?owner=alice").status_code == 404
    client.cookies.clear()
    token = sign_in(client)
    deleted = client.post(f"/workflows/{workflow_id}/delete", data={"csrf_token": token}, follow_redirects=False)
    assert deleted.status_code == 303 and deleted.headers["location"] == "/workflows"
    with app.state.lanner.db.session() as session:
        gone = session.get(Workflow, workflow_id)
        assert gone.deleted_at is not None and not gone.active
    assert soup(client.get("/workflows")).select_one("#workflows-empty") is not None
    assert soup(client.get("/datasets/alice/shapes")).select(".ds-feeder") == []


def test_a_team_viewer_lists_the_teams_workflows_without_delete(client, app, make_account, tmp_path):
    team_with_viewer(app, make_account)
    add_dataset(app, tmp_path, username="olga", owner="acme")
    with app.state.lanner.db.session() as session:
        acme = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        team_id = acme.owner_id
    with app.state.lanner.db.session() as session:  # the team's deployment, saved by olga (an editor of acme)
        olga = Principal.of(accounts.require_user(session, username="olga"))
        deployment = Deployment(owner_id=team_id, project_slug="shapes", model_slug="tiny", task="detect",
                                slug="acme-endpoint", name="Acme endpoint", region="us-central1", backend="local",
                                status="ready", weights_sha256="e" * 64, artefact_sha256="e" * 64)
        session.add(deployment)
        session.flush()
        workflow, errors = workflows_service.save_collect(session, olga, deployment, Collect(
            deployment="acme-endpoint", dataset="shapes"), enabled=True)
        assert not errors
        workflow_id = workflow.id
    token = sign_in(client, "vic")
    page = soup(client.get("/workflows?owner=acme"))
    [row] = page.select("#workflow-list tbody tr")
    assert "Acme endpoint" in text(row) and row.select("form") == []
    feeder = soup(client.get("/datasets/acme/shapes")).select_one(".ds-feeder")  # he reads it: no settings link
    assert "Acme endpoint" in text(feeder) and "its settings" not in text(feeder)
    assert "?owner=acme" in feeder.select("a")[-1]["href"]
    refused = client.post(f"/workflows/{workflow_id}/delete", data={"csrf_token": token, "owner": "acme"},
                          follow_redirects=False)
    assert refused.status_code == 403


def test_an_outlier_says_what_its_number_is(client, app, alice, tmp_path, monkeypatch):
    base = add_dataset(app, tmp_path)
    hashes, matrix = synthetic()
    # one crowd of eight (synthetic's first) and the odd one: nine vectors (copy.jpg and bare.jpg share bytes)
    crowd_of = {"copy.jpg": 0, "train_0002.jpg": 1, "train_0003.jpg": 2, "train_0004.jpg": 3, "bare.jpg": 4,
                "train_0005.jpg": 5, "val_0000.jpg": 6, "val_0001.jpg": 7, "val_0002.jpg": 41}
    embed(app, "alice", "shapes", lambda name: matrix[crowd_of[name]])
    monkeypatch.setattr(health, "MIN_FOR_OUTLIERS", 5)  # nine images: let the far one count
    monkeypatch.setattr(health, "_memo", {})
    sign_in(client)
    page = soup(client.get(base))
    [item] = page.select("#embedding-outliers li")
    shown = text(item)
    assert "σ beyond the median distance" in shown and ", z " not in shown
    assert "robust z-score" in item.select_one("span[title]")["title"]
    z = float(shown.split("cosine distance,")[1].split("σ")[0])
    assert z > health.OUTLIER_Z and np.isfinite(z)
