"""The dataset page's assistant section in process: shown to the owner only (anyone else's post is the 404 of a
missing dataset), its form saves what ``PUT .../assistant`` saves (htmx gets the section again, a plain post a
redirect) and refuses bad values next to their field, its rounds table and chart come from the rounds in the
database, and ``/annotate`` opens the image the assistant is least sure of once it has a model.

The assistants' loop is off here (``assistant_poll_seconds=0``): the rounds written by the test stay as written."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.annotation.models import LabelProposal
from lanner.assistant.models import COMPLETED, FAILED, TRAINING, Assistant, AssistantRound, AssistantScore
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import utcnow
from lanner.projects import service as projects_service
from tests.web.pages import sign_in, soup, text
from tests.web.test_dataset_pages import TRAIN, VAL, add_dataset

LABELLED = TRAIN + VAL + 1  # every image but bare.jpg
HTMX = {"HX-Request": "true"}


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"assistant_poll_seconds": 0})


def form(token: str, **changes: str) -> dict[str, str]:
    return {"csrf_token": token, "enabled": "on", "gpu": "cpu", "min_labels": "20", "every": "25", "epochs": "20",
            "imgsz": "320", **changes}


def test_the_owner_turns_the_assistant_on_and_bad_values_are_refused(client, app, alice, bob, tmp_path):  # noqa: F811
    base = add_dataset(app, tmp_path)
    public = add_dataset(app, tmp_path, slug="open", visibility="public")
    token = sign_in(client, "alice")
    page = soup(client.get(base))
    section = page.select_one("#assistant")
    assert "The assistant is off." in text(section.select_one("#assistant-status"))
    assert f"{LABELLED} of {LABELLED + 1} images labelled" in text(section.select_one("#assistant-counts"))
    assert section.select_one("#label-next-link")["href"] == f"{base}/annotate"
    # Only what runs here: on this server (no GPU) the CPU alone, not the catalogue's 27 types.
    assert [o["value"] for o in section.select("#field-gpu option")] == ["cpu"]
    assert [section.select_one(f"#field-{name}")["value"] for name in ("min_labels", "every")] == ["20", "25"]
    assert page.select_one("script[src*='dataset-assistant.js']") and not page.select("script:not([src])")
    assert not page.select("[style]")

    assert client.post(f"{base}/assistant", data=form("forged"), headers=HTMX).status_code == 403  # CSRF
    saved = client.post(f"{base}/assistant", data=form(token, epochs="5", imgsz="64"), headers=HTMX)
    assert saved.status_code == 200 and "<html" not in saved.text
    status = text(soup(saved).select_one("#assistant-status"))
    # Round 1 needs 20 labelled images, or every image of a smaller dataset: here all 8.
    assert "Waiting for 1 more labelled image before round 1." in status
    assert "Assistant on: settings saved." in text(soup(saved).select_one("#assistant"))
    api = client.get("/api/datasets/alice/shapes/assistant", headers=alice.headers).json()
    assert (api["enabled"], api["status"], api["epochs"], api["imgsz"], api["gpuType"]) == (True, "waiting", 5, 64,
                                                                                             "cpu")

    refused = client.post(f"{base}/assistant", data=form(token, min_labels="0", every="x", gpu="no-such-gpu"),
                          headers=HTMX)
    assert refused.status_code == 422
    errors = soup(refused)
    assert text(errors.select_one("#field-min_labels-error")) == "Enter a whole number from 1 to 1000000."
    assert text(errors.select_one("#field-every-error")) == "Enter a whole number."
    assert text(errors.select_one("#field-gpu-error")) == "Pick one of the GPU types listed."
    assert errors.select_one("#field-every")["value"] == "x"  # the form as typed
    plain = client.post(f"{base}/assistant", data=form(token, imgsz="9999"))  # without JavaScript: the page
    assert plain.status_code == 422 and "Enter a whole number from 32 to 2048." in text(soup(plain))
    assert client.get("/api/datasets/alice/shapes/assistant", headers=alice.headers).json()["imgsz"] == 64

    off = client.post(f"{base}/assistant", data={"csrf_token": token, **{k: v for k, v in form(token).items()
                                                                          if k not in ("enabled", "csrf_token")}},
                      follow_redirects=False)
    assert off.status_code == 303 and off.headers["location"] == f"{base}#assistant"
    assert "The assistant is off." in text(soup(client.get(base)).select_one("#assistant-status"))

    sign_in(client, "bob")
    assert soup(client.get(public)).select_one("#assistant") is None
    bob_token = sign_in(client, "bob")
    for url in (f"{base}/assistant", f"{public}/assistant", "/datasets/alice/nothing/assistant"):
        assert client.post(url, data=form(bob_token), follow_redirects=False).status_code == 404, url
    assert not client.get("/api/datasets/alice/open/assistant", headers=alice.headers).json()["enabled"]


def add_rounds(db, username: str = "alice", slug: str = "shapes") -> dict[str, str]:
    """Three rounds of the dataset's assistant (made enabled, ``min_labels`` 5, when there is none yet): 1
    completed, 2 completed (4 proposals shown, 3 accepted unchanged), 3 failed."""
    with db.session() as session:
        owner = accounts_service.require_user(session, username=username)
        dataset = session.scalar(select(Dataset).where(Dataset.owner_id == owner.id, Dataset.slug == slug))
        project = projects_service.create_project(session, Principal.of(owner), slug=None, name=f"{slug}-assistant")
        models = [projects_service.create_model(session, project, name=f"round-{n}") for n in (1, 2)]
        assistant = session.scalar(select(Assistant).where(Assistant.dataset_id == dataset.id))
        if assistant is None:
            assistant = Assistant(dataset_id=dataset.id, enabled=True, min_labels=5, every=25)
            session.add(assistant)
            session.flush()
        start = utcnow() - timedelta(hours=1)
        session.add_all([
            AssistantRound(assistant_id=assistant.id, round=1, labelled=5, model_id=models[0].id, status=COMPLETED,
                           map50=0.412, started_at=start, completed_at=start + timedelta(minutes=3), scored=1),
            AssistantRound(assistant_id=assistant.id, round=2, labelled=30, model_id=models[1].id, status=COMPLETED,
                           map50=0.655, started_at=start + timedelta(minutes=10),
                           completed_at=start + timedelta(minutes=14), scored=1),
            AssistantRound(assistant_id=assistant.id, round=3, labelled=55, status=FAILED,
                           reason="the run failed: out of credit", started_at=start + timedelta(minutes=20),
                           completed_at=start + timedelta(minutes=21)),
            LabelProposal(dataset_id=dataset.id, item_key="k1", model_id=models[1].id, model_ref="-", labels=[],
                          resolved_at=start, shown=4, accepted_unchanged=3)])
        return {"assistant": assistant.id, "dataset": dataset.id, "model": f"{username}/{project.slug}/round-2"}


def test_the_rounds_table_chart_and_state_come_from_the_rounds(client, app, alice, tmp_path):  # noqa: F811
    base = add_dataset(app, tmp_path)
    made = add_rounds(app.state.lanner.db)
    sign_in(client, "alice")
    section = soup(client.get(base)).select_one("#assistant")
    assert text(section.select_one("#assistant-status")).startswith(
        "Failed Round 3 failed: the run failed: out of credit. Save the settings to try again.")
    rows = [[text(td) for td in tr.select("td")] for tr in section.select("#assistant-rounds tbody tr")]
    assert [r[:6] for r in rows] == [["3", "55", "—", "0", "—", "failed the run failed: out of credit"],
                                     ["2", "30", "0.655", "4", "75%", "completed"],
                                     ["1", "5", "0.412", "0", "—", "completed"]]
    assert all(r[6].endswith("UTC") for r in rows) and rows[1][7].endswith("UTC")
    assert section.select_one("#assistant-rounds tr[data-round='2'] a")["href"] == f"/{made['model']}"
    chart = json.loads(section.select_one("#assistant-chart")["data-chart"])
    assert chart == {"rounds": [1, 2, 3], "map50": [0.412, 0.655, None], "accepted": [None, 0.75, None]}

    with app.state.lanner.db.session() as session:  # round 4 trains: its run's page is linked
        model_id = session.scalar(select(AssistantRound.model_id).where(AssistantRound.round == 2))
        session.add(AssistantRound(assistant_id=made["assistant"], round=4, labelled=60, model_id=model_id,
                                   status=TRAINING))
    status = soup(client.get(base)).select_one("#assistant-status")
    assert text(status).startswith("Training Training round 4: its run")
    assert status.select_one("#assistant-run-link")["href"] == f"/{made['model']}"


def test_annotate_opens_the_image_the_assistant_is_least_sure_of(client, app, alice, tmp_path):  # noqa: F811
    base = add_dataset(app, tmp_path)
    with app.state.lanner.db.session() as session:  # two more unlabelled images, after bare.jpg by name
        session.execute(update(DatasetItem).where(DatasetItem.name.in_(("val_0000.jpg", "val_0001.jpg")))
                        .values(labels=None, label_count=0))
        keys = {name: key for name, key in session.execute(select(DatasetItem.name, DatasetItem.key))}
    sign_in(client, "alice")

    def opened() -> str:
        response = client.get(f"{base}/annotate", follow_redirects=False)
        assert response.status_code == 303
        return response.headers["location"].rpartition("/")[2]

    assert opened() == keys["bare.jpg"]  # no assistant: the first unlabelled image by name
    made = add_rounds(app.state.lanner.db)
    with app.state.lanner.db.session() as session:
        session.add_all([AssistantScore(assistant_id=made["assistant"], item_key=keys[name], round=2, score=score)
                         for name, score in (("bare.jpg", 0.1), ("val_0000.jpg", 0.3), ("val_0001.jpg", 0.9))])
    assert opened() == keys["val_0001.jpg"]  # the least sure first
    with app.state.lanner.db.session() as session:  # no round with a model: name order again
        session.execute(update(AssistantRound).values(model_id=None))
    assert opened() == keys["bare.jpg"]


def test_an_open_page_polls_the_state_and_gets_the_chart_and_rounds_only_when_they_changed(client, app, alice,  # noqa: F811
                                                                                         bob, tmp_path):  # noqa: F811
    base = add_dataset(app, tmp_path)
    token = sign_in(client, "alice")
    live = soup(client.get(base)).select_one("#assistant-live")
    assert live is not None and not live.has_attr("hx-trigger")  # off: the page does not poll
    client.post(f"{base}/assistant", data=form(token), headers=HTMX)
    live = soup(client.get(base)).select_one("#assistant-live")
    assert live["hx-trigger"] == "every 15s" and live["role"] == "status"  # waiting for labels: now and then
    seen = live["hx-get"].partition("?seen=")[2]
    assert live["hx-get"] == f"{base}/assistant/live?seen={seen}"

    quiet = client.get(f"{base}/assistant/live", params={"seen": seen}, headers=HTMX)
    assert quiet.status_code == 200 and "<html" not in quiet.text
    assert soup(quiet).select_one("#assistant-live") and not soup(quiet).select("[hx-swap-oob]")  # nothing new

    made = add_rounds(app.state.lanner.db)  # rounds 1-2 completed, 3 failed
    changed = soup(client.get(f"{base}/assistant/live", params={"seen": seen}, headers=HTMX))
    assert text(changed.select_one("#assistant-status")).startswith("Failed Round 3 failed")
    assert [e["id"] for e in changed.select("[hx-swap-oob]")] == ["assistant-quality", "assistant-rounds-box"]
    assert len(changed.select("#assistant-rounds tbody tr")) == 3 and changed.select_one("#assistant-chart")
    again = changed.select_one("#assistant-live")["hx-get"].partition("?seen=")[2]
    assert again != seen and not soup(client.get(f"{base}/assistant/live", params={"seen": again},
                                                 headers=HTMX)).select("[hx-swap-oob]")

    with app.state.lanner.db.session() as session:  # round 4 trains: polled more often, the run linked
        session.add(AssistantRound(assistant_id=made["assistant"], round=4, labelled=60, status=TRAINING))
    training = soup(client.get(f"{base}/assistant/live", params={"seen": again}, headers=HTMX))
    assert training.select_one("#assistant-live")["hx-trigger"] == "every 5s"
    assert text(training.select_one("#assistant-status")).startswith("Training Training round 4")

    plain = client.get(f"{base}/assistant/live", follow_redirects=False)  # not htmx: on to the section
    assert plain.status_code == 303 and plain.headers["location"] == f"{base}#assistant"
    sign_in(client, "bob")  # anyone else: the 404 of a missing dataset
    assert client.get(f"{base}/assistant/live", headers=HTMX).status_code == 404
    assert client.get(f"{base}/assistant/live", params={"seen": "x" * 33}, headers=HTMX).status_code in (404, 422)
