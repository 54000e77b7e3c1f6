"""The train dialog and the GPUs page in-process: every GPU type with time and cost, the advisor's picks, the
deadline/budget re-rank, and launching through ``training.start``'s service with each refusal (403 tier, 402
credit, 422 batch) next to its field. A fake executor offers ``cpu`` and ``h100-sxm``; nothing trains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from lanner.gpus import memory
from lanner.gpus.catalogue import get_catalogue
from lanner.synthetic import make_detection_dataset
from lanner.training.models import Run
from lanner.web.templating import money
from tests.datasets.helpers import package, upload_dataset
from tests.web.pages import PASSWORD, sign_in, soup, text, token_of

DOLLAR = 1_000_000
DATASET = "ul://alice/datasets/shapes"
SMALL = {"dataset": DATASET, "model": "yolo11n.yaml", "epochs": "2", "imgsz": "96", "batch": "4", "patience": "100"}


@pytest.fixture
def setup(app, client, make_account, sdk, tmp_path: Path, fake_executor):
    """alice (free tier) with a dataset, signed in; returns (account, CSRF token)."""
    def make(credits: int = 20 * DOLLAR) -> tuple[Any, str]:
        alice = make_account("alice", password=PASSWORD, credits_micros=credits)
        archive = package(make_detection_dataset(tmp_path / "shapes", train=12, val=6, size=96).parent,
                          tmp_path / "zip")
        upload_dataset(sdk(alice), client, "alice", "shapes", archive)
        return alice, sign_in(client)
    return make


def launch(client, token: str, **fields: str) -> Any:
    form = {**SMALL, "project": "p", "name": "m", "gpu": "cpu", "action": "launch", "csrf_token": token, **fields}
    return client.post("/train", data=form, follow_redirects=False)


def rows(response: Any) -> list[Any]:
    """Every GPU type's row: those that run here, then those under "not available here"."""
    return soup(response).select("#gpu-table tbody tr, #gpu-elsewhere-table tbody tr")


def test_the_table_lists_every_gpu_type_with_time_and_cost(client, settings, setup):
    setup()
    response = client.get("/train", params=SMALL)
    assert response.status_code == 200
    found = {row["data-gpu"]: row for row in rows(response)}
    assert set(found) == {gpu.id for gpu in get_catalogue(settings).offered()}
    for row in found.values():
        cells = row.select("td")
        assert "$" in text(cells[3]) and "–" in text(cells[2]) and text(cells[1])
    page = soup(response)
    assert page.select(".pick-cheapest") and page.select(".pick-fastest") and page.select(".pick-balanced")
    assert page.select_one("#cost-chart")["data-chart"].startswith("{")
    assert "$" in text(page.select_one("#balance-after"))
    locked = found["h200-sxm"]
    assert "locked" in locked["class"] and "Needs pro" in text(locked)
    page_rows = {row["data-gpu"] for row in page.select("#gpu-table tbody tr")}
    assert page_rows == {"cpu", "h100-sxm"}  # what the fake executor has; the rest under "not available here"
    assert not page.select("#gpu-elsewhere-table input[type=radio]") and page.select_one("#gpu-elsewhere")
    margin = text(found["h100-sxm"].select_one(".memory-margin"))  # the chosen batch's peak against the card
    assert "batch 4 fits" in margin and f"of {memory.usable_gb(80):.1f} usable GB" in margin and "% free" in margin
    assert "largest batch that fits:" in margin
    token = token_of(client.get("/train").text)
    htmx = client.post("/train", data={**SMALL, "csrf_token": token}, headers={"HX-Request": "true"})
    assert htmx.text.lstrip().startswith("<section") and "gpu-table" in htmx.text


def test_a_deadline_or_budget_re_ranks_the_table(client, setup):
    setup()
    plain = [row["data-gpu"] for row in rows(client.get("/train", params=SMALL))]
    tight = client.get("/train", params={**SMALL, "deadline": "0.02"})
    ranked = rows(tight)
    outside = ["outside" in row.get("class", []) for row in ranked]
    assert outside == sorted(outside)  # those within the deadline first
    assert any(outside) and sorted(row["data-gpu"] for row in ranked) == sorted(plain)
    cheap = rows(client.get("/train", params={**SMALL, "budget": "0.01"}))
    flags = ["outside" in row.get("class", []) for row in cheap]
    assert flags == sorted(flags)
    bad = client.get("/train", params={**SMALL, "deadline": "soon"})
    assert "Enter a number." in text(soup(bad).select_one("#field-deadline-error"))


def test_a_tier_locked_gpu_is_refused_next_to_the_gpu_field(client, setup):
    _, token = setup()
    response = launch(client, token, gpu="h200-sxm")
    assert response.status_code == 403
    assert "needs the pro tier" in text(soup(response).select_one("#field-gpu-error"))


def test_insufficient_credit_is_shown_next_to_the_balance(client, setup):
    _, token = setup(credits=0)
    response = launch(client, token, gpu="h100-sxm")
    assert response.status_code == 402
    assert "insufficient credits" in text(soup(response).select_one("#field-credit-error"))
    again = launch(client, token, gpu="h100-sxm")  # the refused launch left no model behind: same error again
    assert again.status_code == 402


def test_a_batch_that_does_not_fit_is_shown_next_to_batch(client, setup):
    _, token = setup()
    response = launch(client, token, gpu="h100-sxm", batch="4096", imgsz="1280", model="yolo11x.yaml")
    assert response.status_code == 422
    assert "largest batch that fits" in text(soup(response).select_one("#field-batch-error"))


def test_launch_starts_the_run_and_goes_to_the_model_page(client, setup):
    _, token = setup()
    response = launch(client, token, quick="on", quick_fraction="0.5", quick_epochs="1", max_cost="5")
    assert response.status_code == 303 and response.headers["location"] == "/alice/p/m"
    training = client.get("/api/models/alice/p/m/training").json()["job"]
    assert training is not None
    name_taken = launch(client, token)
    assert name_taken.status_code == 422 and "already" in text(soup(name_taken).select_one("#field-name-error"))


def test_the_gpus_page_lists_the_catalogue_and_the_estimator_accuracy(client, settings, make_account):
    make_account("alice", password=PASSWORD)
    sign_in(client)
    response = client.get("/gpus")
    assert response.status_code == 200
    page = soup(response)
    ids = {row["data-gpu"] for row in page.select("#gpu-catalogue tbody tr")}
    assert ids == {gpu.id for gpu in get_catalogue(settings).all()}
    assert "Needs pro" in text(page.select_one('tr[data-gpu="h200-sxm"]'))
    assert "16 vCPU · 120 GB" in text(page.select_one('tr[data-gpu="h100-sxm"]'))  # the host that comes with it
    assert "no finished runs" in text(page.select_one("#accuracy")).lower()


@pytest.mark.parametrize("max_cost", ["", "0.01"], ids=["uncapped", "capped"])
def test_the_hold_shown_before_launch_is_the_hold_training_start_places(client, app, setup, max_cost):
    _, token = setup()
    form = {**SMALL, "gpu": "h100-sxm", "max_cost": max_cost}
    summary = soup(client.get("/train", params=form))
    shown = next(text(dt.find_next_sibling("dd")) for dt in summary.select("dt") if text(dt) == "Held at launch")
    assert launch(client, token, **form).status_code == 303
    with app.state.lanner.db.session() as session:
        held = session.scalars(select(Run.hold_micros)).one()
    assert held > 0 and shown == money(held)
    assert held == 10_000 or not max_cost  # the cap of one cent binds
