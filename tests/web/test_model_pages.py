"""Projects and model pages in-process: the project's runs table (sorted), compare, the model page, its live
stream after new webhook events, cancel, and another user's private project or model as a 404."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from lanner.accounts.principal import Principal
from lanner.gpus.catalogue import get_catalogue
from lanner.web import live
from lanner.web.project_pages import live_reader
from tests.test_protocol import METRICS, send, start
from tests.web.pages import PASSWORD, sign_in, soup, text, token_of
from tests.web.test_live import FakeRequest

EPOCH = {**METRICS, "metrics/mAP50-95(B)": 0.2, "metrics/precision(B)": 0.5, "metrics/recall(B)": 0.4}


@pytest.fixture
def runs(sdk, alice):
    """Two runs of alice/shapes: ``train`` (2 epochs, running, with console) and ``train-2`` (1 epoch)."""
    platform = sdk(alice)
    first = start(platform, epochs=3)
    second = start(platform, epochs=5, batch="8", system={"cpu": 2})
    platform.training.metrics(event="training_started", model_id=second["modelId"],
                              data={"epochs": 5, "trainArgs": {"model": "yolo11s.yaml", "epochs": "5"}})
    for epoch in range(2):
        send(platform, first["modelId"], "epoch_end", {"epoch": epoch, "metrics": {
            **EPOCH, "metrics/mAP50-95(B)": (0.2, 0.3)[epoch]}, "system": {"cpu": 40.0, "gpus": {"0": {"usage": 90}}}})
    send(platform, first["modelId"], "console_output", {"chunkId": 1, "content": "Epoch 1/3 ...\n", "lineCount": 1})
    send(platform, second["modelId"], "epoch_end", {"epoch": 0, "metrics": EPOCH})
    return platform, first, second


def test_projects_and_the_project_table(client, runs):
    sign_in(client)
    listing = soup(client.get("/projects"))
    row = listing.select_one("#project-list tbody tr")
    assert "shapes" in text(row) and row.select("td")[2].get_text(strip=True) == "2"
    page = client.get("/alice/shapes?sort=map&order=desc")
    assert page.status_code == 200
    rows = soup(page).select("#run-list tbody tr")
    assert [r["data-model"] for r in rows] == ["train", "train-2"]  # best mAP50-95 0.3 before 0.2
    cells = [text(c) for c in rows[0].select("td")]
    assert cells[2] == "running" and cells[4] == "2 / 3" and cells[7] == "0.3000"
    assert cells[8] == "alice with their own trainer"
    ascending = soup(client.get("/alice/shapes?sort=map&order=asc")).select("#run-list tbody tr")
    assert [r["data-model"] for r in ascending] == ["train-2", "train"]
    assert soup(page).select_one("#compare-form")["action"] == "/alice/shapes/-/compare"


def test_compare_overlays_curves_and_diffs_arguments(client, runs):
    sign_in(client)
    page = soup(client.get("/alice/shapes/-/compare?pick=train&pick=train-2"))  # the form, without script
    chart = json.loads(page.select_one("[data-compare]")["data-compare"])
    assert [c["name"] for c in chart] == ["train", "train-2"]
    assert chart[0]["x"] == [1, 2] and chart[0]["map"] == [0.2, 0.3] and chart[1]["precision"] == [0.5]
    differs = {text(r.th).split(" (")[0] for r in page.select("#arg-diff tr.differs")}
    assert differs == {"epochs", "model"}
    same = [r for r in page.select("#arg-diff tbody tr") if "differs" not in (r.get("class") or [])]
    assert same == []  # both runs have only model and epochs, and both differ
    assert client.get("/alice/shapes/-/compare?models=train,nope").status_code == 404
    linked = soup(client.get("/alice/shapes/-/compare?models=train-2,train"))  # a shared link
    assert [c["name"] for c in json.loads(linked.select_one("[data-compare]")["data-compare"])] == ["train-2", "train"]


def test_a_model_named_compare_is_a_model_page(client, runs):
    platform, _, _ = runs
    start(platform, name="compare")
    sign_in(client)
    page = soup(client.get("/alice/shapes/compare"))
    assert text(page.select_one("h1")) == "compare" and page.select_one("#model-live") is not None


def test_the_model_page(client, runs):
    sign_in(client)
    page = soup(client.get("/alice/shapes/train"))
    state = json.loads(page.select_one("#model-live")["data-state"])
    assert state["curves"]["map"] == [0.2, 0.3] and state["epochs"] == "2 / 3" and state["active"]
    assert "Epoch 1/3" in text(page.select_one("#console"))
    assert text(page.select_one("[data-live-field=epochs]")) == "2 / 3"
    system = text(page.select_one("#system-metrics"))
    assert "CPU 40 %" in system and "GPU 0 90 %" in system  # the trainer's cpu and gpus.0.usage, with units
    history = [text(r) for r in page.select("#run-history tbody tr")]
    assert history and "running" in history[-1]
    when = text(page.select_one("#run-history tbody td"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", when), when  # in words, not an ISO stamp
    assert page.select_one("#cancel-form") is not None
    assert page.select_one("#model-live")["data-live-src"] == "/alice/shapes/train/live"
    assert page.find("script", src=False) is None and not page.select("[style]")  # the CSP allows it all


def test_the_live_stream_follows_new_webhook_events(app, client, runs):
    platform, first, _ = runs
    sign_in(client)
    with client.stream("GET", "/alice/shapes/train/live") as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:"):
                break
    assert json.loads(line.removeprefix("data:"))["curves"]["x"] == [1, 2]

    # the stream's reader, followed as the stream does: a new epoch and console line are the next event
    alice = Principal(user_id=first_owner(app), username="alice", tier="free", key_id=None)
    read = live_reader(alice, "alice", "shapes", "train", get_catalogue(app.state.lanner.settings))

    async def follow() -> tuple[dict, dict]:
        events = live.follow(FakeRequest(app), read, event="run", interval=0)
        before = json.loads((await anext(events)).data)
        send(platform, first["modelId"], "epoch_end", {"epoch": 2, "metrics": {**EPOCH, "metrics/mAP50-95(B)": 0.45}})
        send(platform, first["modelId"], "console_output", {"chunkId": 2, "content": "Epoch 3/3 done\n",
                                                            "lineCount": 1})
        after = json.loads((await anext(events)).data)
        while after["curves"]["x"] != [1, 2, 3] or len(after["console"]) < 2:  # the two events may land apart
            after = json.loads((await anext(events)).data)
        await events.aclose()
        return before, after

    before, after = asyncio.run(follow())
    assert before["curves"]["x"] == [1, 2] and after["curves"]["map"] == [0.2, 0.3, 0.45]
    assert after["console"][-1] == {"id": 2, "text": "Epoch 3/3 done\n"} and after["epochs"] == "3 / 3"


def first_owner(app) -> str:
    from lanner.accounts import service as accounts_service

    with app.state.lanner.db.session() as session:
        return accounts_service.get_user_by_username(session, username="alice").id


def test_cancel_from_the_page(client, runs):
    platform, first, _ = runs
    sign_in(client)
    token = token_of(client.get("/alice/shapes/train").text)
    done = client.post("/alice/shapes/train/cancel", data={"csrf_token": token}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/alice/shapes/train"
    page = soup(client.get("/alice/shapes/train"))
    assert "Training cancelled" in text(page.select_one("#messages"))
    assert text(page.select_one("#model-status")) == "cancelled" and page.select_one("#cancel-form") is None
    assert send(platform, first["modelId"], "epoch_end", {"epoch": 2, "metrics": EPOCH})["cancelled"] is True
    again = client.post("/alice/shapes/train/cancel", data={"csrf_token": token})
    assert "no active training run" in text(soup(again).select_one("#messages"))
    assert client.post("/alice/shapes/train-2/cancel", data={}).status_code == 403  # no CSRF token


def test_another_users_private_project_and_model_are_404(client, runs, make_account):
    make_account("bob", password=PASSWORD)
    sign_in(client, "bob")
    for path in ("/alice/shapes", "/alice/shapes/train", "/alice/shapes/train/live",
                 "/alice/shapes/-/compare?models=train"):
        response = client.get(path, headers={"Accept": "text/html"})
        assert response.status_code == 404 and "Not found" in response.text, path
    token = token_of(client.get("/projects").text)
    assert client.post("/alice/shapes/train/cancel", data={"csrf_token": token}).status_code == 404
    assert "shapes" not in text(soup(client.get("/projects")).select_one("main"))


def test_reserved_names_are_not_owners(client, runs):
    sign_in(client)
    assert client.get("/api/health").json()["status"] == "ok"
    assert client.get("/account").status_code == 200
    assert client.get("/datasets/x", follow_redirects=False).status_code in (303, 404)
    assert "project-list" not in client.get("/datasets/x").text


def test_signed_out_visitors_are_sent_to_sign_in(client, runs):
    for path in ("/projects", "/alice/shapes", "/alice/shapes/train"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"] == f"/login?next={path}"


def test_a_metered_run_shows_cost_so_far_and_projected(app, client, runs):
    from sqlalchemy import update

    from lanner.training.models import Run

    _, first, _ = runs
    with app.state.lanner.db.session() as session:  # as if Lanner had launched it at $3.60 an hour
        session.execute(update(Run).where(Run.id == first["runId"]).values(price_micros_per_hour=3_600_000))
    sign_in(client)
    state = json.loads(soup(client.get("/alice/shapes/train")).select_one("#model-live")["data-state"])
    # below a cent it reads "<$0.01" (money is shown in whole cents)
    assert state["cost"] == "$0.00" and state["projected"].removeprefix("<").startswith("$")
    assert abs(state["projected_micros"] - 1_000 * state["eta_s"]) <= 1_000  # $3.60/h is $0.001 a second


def test_checkpoints_and_final_plots_on_the_model_page(client, runs):
    platform, first, _ = runs
    model_id, run_id = first["modelId"], first["runId"]
    for name, content in (("last.pt", b"epoch-1"), ("best.pt", b"best-weights")):
        upload = platform.models.upload_checkpoint(filename=name, model_id=model_id, run_id=run_id)
        assert client.put(upload["uploadUrl"], content=content).status_code == 200
        send(platform, model_id, "checkpoint_saved", {"modelPath": upload["gcsPath"], "runId": run_id})
    pr = {"type": "pr_curve", "x": [0.0, 0.5, 1.0], "y": [[1.0, 0.8, 0.2], [0.9, 0.6, 0.0]], "ap": [[0.7], [0.5]],
          "classes": ["circle", "square"]}
    broken = {"type": "f1_curve", "x": [0.0, 1.0], "y": [[0.5]]}  # lengths disagree: left out, not a crash
    matrix = {"type": "confusion_matrix", "matrix": [[5, 1, 0], [0, 4, 1], [1, 0, 0]]}
    send(platform, model_id, "training_complete", {"results": {"metrics": {"fitness": 0.3}},
                                                   "plots": [pr, broken, matrix, "junk"]})
    sign_in(client)
    page = soup(client.get("/alice/shapes/train"))
    rows = page.select("#checkpoints tbody tr")
    assert [text(r.td) for r in rows] == ["best.pt", "last.pt"]  # newest first
    assert "model weights" in text(rows[0]) and "model weights" not in text(rows[1])
    assert client.get(rows[1].a["href"]).content == b"epoch-1"
    curves = [json.loads(c["data-plot"]) for c in page.select("[data-plot]")]
    assert len(curves) == 1 and curves[0]["title"] == "Precision–recall"
    assert [s["label"] for s in curves[0]["series"]] == ["all classes", "circle", "square"]
    assert curves[0]["series"][0]["y"] == [0.95, 0.7, 0.1]
    cells = [[text(c) for c in r.select("th, td")] for r in page.select("table.matrix tbody tr")]
    assert cells[0] == ["circle", "5", "1", "0"] and cells[2][0] == "background"
    assert page.select_one("table.matrix td.heat-5") is not None and not page.select("[style]")


def test_who_started_a_run_is_recorded(client, runs, make_account):
    """The project's runs table names the person behind the key or session that started each run."""
    sign_in(client)
    rows = soup(client.get("/alice/shapes")).select("#run-list tbody tr")
    assert {text(r.select("td")[8]) for r in rows} == {"alice with their own trainer"}
