"""The model page's Export and Preview sections and its cards, in-process (no export worker runs: the queue is
off, and a test finishes a job as the worker's upload would): one button per format this server can build, a
form post that queues the job ``exports.create`` queues, the list with status, size, time and download link;
an editor may export, a viewer sees the list and downloads only, another user's model is a 404. And the cards:
a run's staged ``last.pt`` is offered on the Weights card (never "no checkpoint uploaded yet" beside a list
that has it), weights without a run's checkpoint are listed among the checkpoints, system readings have units."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from lanner.accounts import service as accounts
from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.exports import jobs
from lanner.exports.formats import available
from lanner.exports.models import ModelExport
from lanner.projects import service as projects_service
from lanner.teams import service as teams_service
from tests.conftest import GENEROUS_LIMITS, TEST_URL
from tests.test_protocol import send, start
from tests.web.pages import PASSWORD, sign_in, soup, text

HTML = {"Accept": "text/html"}


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    """The export queue off (``export_poll_seconds=0``): a queued export stays queued."""
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL, secret_key="test-secret",
                    api_key_cache_seconds=0, export_poll_seconds=0, **GENEROUS_LIMITS)


@pytest.fixture
def acme(app: Any, make_account: Any) -> str:
    """Team acme: olga owner, ed editor, vic viewer; eve outside. Its project ``shapes`` has the model ``tiny``
    with weights (bytes: no worker reads them here)."""
    for name in ("olga", "ed", "vic", "eve"):
        make_account(name, password=PASSWORD)
    ctx = app.state.lanner
    stored = ctx.blobs.put_file(io.BytesIO(b"weights of tiny"))
    with ctx.db.session() as session:
        olga = Principal.of(accounts.require_user(session, username="olga"))
        teams_service.create_team(session, name="acme", owner=accounts.require_user(session, username="olga"))
        for name, role in (("ed", "editor"), ("vic", "viewer")):
            teams_service.add_member(session, olga, "acme", name, role)
        project = projects_service.create_project(session, olga, slug="shapes", name="shapes", owner="acme")
        record = projects_service.create_model(session, project, name="tiny")
        record.weights_sha256, record.weights_size, record.weights_name = stored.sha256, stored.size, "best.pt"
        record.task, record.status = "detect", "completed"
        session.commit()
    return "acme"


def as_user(client: Any, name: str) -> str:
    client.cookies.clear()
    return sign_in(client, name)


def export_now(client: Any, token: str, fmt: str = "onnx", path: str = "/acme/shapes/tiny") -> Any:
    return client.post(f"{path}/exports", data={"csrf_token": token, "format": fmt}, headers=HTML,
                       follow_redirects=False)


def finish(app: Any, content: bytes = b"\x08\x07onnx bytes") -> str:
    """The queued export completed, as the worker's upload completes it; returns its artefact's digest."""
    ctx = app.state.lanner
    stored = ctx.blobs.put_file(io.BytesIO(content))
    with ctx.db.session() as session:
        job = session.query(ModelExport).one()
        jobs.new_attempt(job)
        assert jobs.launched(session, job, external_id="fake:1", executor="fake")
        jobs.record_artefact(session, f"{jobs.SLOT_PREFIX}{job.id}/{job.slot}/{job.filename}", sha256=stored.sha256,
                             size=stored.size)
        session.commit()
    return stored.sha256


def test_an_editor_exports_from_the_page_and_downloads_it(app: Any, client: Any, acme: str) -> None:
    assert "onnx" in available()  # lanner[export] is installed where the tests run
    token = as_user(client, "ed")
    page = soup(client.get("/acme/shapes/tiny"))
    buttons = page.select("#export-form button[name=format]")
    assert buttons[0]["value"] == "onnx" and text(buttons[0]) == "Export ONNX"
    assert {b["value"] for b in buttons} == set(available()) - {"engine"}  # TensorRT needs a GPU named
    assert "Edge TPU" in text(page.select_one(".export-unavailable"))  # and why the others are missing
    assert "No export yet" in text(page.select_one("#export-list"))
    assert page.select_one("#export-list").get("hx-get") is None  # nothing to follow: no polling
    assert page.select_one('#deployments-section a[href="#exports-section"]') is not None  # "export to ONNX"

    done = export_now(client, token)
    assert done.status_code == 303 and done.headers["location"] == "/acme/shapes/tiny#exports"
    page = soup(client.get("/acme/shapes/tiny"))
    assert "Exporting to ONNX" in text(page.select_one("#messages"))
    row = page.select_one("#exports tbody tr")
    assert row["data-status"] == "queued" and "waiting for a worker" in text(row)
    assert page.select_one("#export-list")["hx-get"] == "/acme/shapes/tiny/exports"  # polled while active
    listed = client.get("/api/models/acme/shapes/tiny/exports", headers={"Accept": "application/json"})
    assert [e["format"] for e in listed.json()["exports"]] == ["onnx"]  # the API's job, not another
    again = export_now(client, token)
    assert "already under way" in text(soup(client.get(again.headers["location"])).select_one("#messages"))

    digest = finish(app)
    fragment = soup(client.get("/acme/shapes/tiny/exports", headers={"HX-Request": "true"}))
    row = fragment.select_one("#exports tbody tr")
    assert row["data-status"] == "completed" and fragment.select_one("#export-list").get("hx-get") is None
    cells = [text(td) for td in row.select("td")]
    assert cells[2] == "12 B" and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", cells[3]), cells
    assert re.fullmatch(r"\d+ s", cells[4]), cells
    link = row.select_one("a[download]")
    assert link["download"] == "tiny.onnx" and digest in link["href"]
    assert client.get(link["href"]).content == b"\x08\x07onnx bytes"


def test_a_viewer_sees_exports_but_cannot_start_one(app: Any, client: Any, acme: str) -> None:
    export_now(client, as_user(client, "olga"))
    finish(app)
    token = as_user(client, "vic")
    page = soup(client.get("/acme/shapes/tiny"))
    assert page.select_one("#export-form") is None  # no buttons
    assert page.select_one("#exports a[download]")["download"] == "tiny.onnx"  # but the download
    assert page.select_one("#preview-form")["data-predict"] == "/api/models/acme/shapes/tiny/predict"
    assert page.select_one("#preview-imgsz")["value"] == "640"  # no training arguments: the API's default
    refused = export_now(client, token, "torchscript")
    assert refused.status_code == 403
    with app.state.lanner.db.session() as session:
        assert session.query(ModelExport).count() == 1


def test_bad_formats_and_other_peoples_models(app: Any, client: Any, acme: str) -> None:
    token = as_user(client, "ed")
    for fmt, said in (("edgetpu", "Edge TPU compiler"), ("gif", "'gif' is not an export format"),
                      ("engine", "gpuType")):
        answer = export_now(client, token, fmt)
        assert answer.status_code == 303, fmt
        assert said in text(soup(client.get(answer.headers["location"])).select_one("#messages")), fmt
    token = as_user(client, "eve")
    assert export_now(client, token).status_code == 404
    assert client.get("/acme/shapes/tiny/exports", headers=HTML).status_code == 404
    with app.state.lanner.db.session() as session:
        assert session.query(ModelExport).count() == 0


def test_weights_and_checkpoint_cards_agree(app: Any, client: Any, make_account: Any, sdk: Any) -> None:
    """A run that uploaded last.pt (the worker's resume checkpoint, never promoted): the Weights card offers it
    instead of saying "no checkpoint uploaded yet"; weights that came without a checkpoint are listed."""
    alice = make_account("alice", password=PASSWORD)
    platform = sdk(alice)
    run = start(platform, epochs=3, trainArgs={"model": "yolo11n.yaml", "epochs": "3", "imgsz": "96"})
    send(platform, run["modelId"], "epoch_end", {"epoch": 0, "metrics": {"metrics/mAP50(B)": 0.1},
                                                 "system": {"cpu": 35.5, "ram": 12, "gpus": {"0": {
                                                     "usage": 90, "memory": 41.2, "temp": 71, "power": 285}},
                                                     "disk_io": {"read_mbs": 1.5}, "network": {"sent_mbs": 0.25}}})
    sign_in(client)
    page = soup(client.get("/alice/shapes/train"))
    assert "no checkpoint uploaded yet" in text(page.select_one("#weights-card"))  # true: nothing came yet
    assert page.select_one("#checkpoints") is None
    assert page.select_one("#exports-section") is None and page.select_one("#preview") is None  # no weights

    upload = platform.models.upload_checkpoint(filename="last.pt", model_id=run["modelId"], run_id=run["runId"])
    client.cookies.clear()  # the trainer's signed PUT carries no session
    assert client.put(upload["uploadUrl"], content=b"epoch-1").status_code == 200
    sign_in(client)
    page = soup(client.get("/alice/shapes/train"))
    card = text(page.select_one("#weights-card"))
    assert "no checkpoint uploaded yet" not in card and "last.pt" in card and "newest checkpoint" in card
    assert client.get(page.select_one("#weights-download")["href"]).content == b"epoch-1"
    assert [text(r.td) for r in page.select("#checkpoints tbody tr")] == ["last.pt"]
    system = dict(zip([text(d) for d in page.select("#system-metrics dt")],
                      [text(d) for d in page.select("#system-metrics dd")], strict=True))
    assert system == {"CPU": "35.5 %", "RAM": "12 %", "GPU 0": "90 %", "GPU 0 memory": "41.2 %",
                      "GPU 0 temperature": "71 °C", "GPU 0 power": "285 W", "Disk read": "1.5 MB/s",
                      "Network out": "0.25 MB/s"}

    ctx = app.state.lanner  # weights put on the model another way (a clone, an upload): listed as well
    stored = ctx.blobs.put_file(io.BytesIO(b"other weights"))
    with ctx.db.session() as session:
        record = projects_service.get_model(session, Principal.of(accounts.require_user(session, username="alice")),
                                            owner="alice", project="shapes", model="train")
        record.weights_sha256, record.weights_size, record.weights_name = stored.sha256, stored.size, "best.pt"
        session.commit()
    page = soup(client.get("/alice/shapes/train"))
    assert "the model's weights" in text(page.select_one("#weights-card"))
    rows = page.select("#checkpoints tbody tr")
    assert [text(r.td) for r in rows] == ["best.pt", "last.pt"] and "model weights" in text(rows[0])
    assert page.select_one("#preview-imgsz")["value"] == "96"  # Preview predicts at the size it trained at
