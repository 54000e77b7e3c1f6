"""The train dialog and the GPUs page in-process: every GPU type with time and cost, the advisor's picks, the
deadline/budget re-rank, and launching through ``training.start``'s service with each refusal (403 tier, 402
credit, 422 batch) next to its field. A fake executor offers ``cpu`` and ``h100-sxm``; nothing trains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from lanner.gpus import memory
from lanner.gpus.catalogue import get_catalogue
from lanner.projects.models import ModelRecord
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


def checked(page: Any) -> str:
    return page.select_one('input[name="gpu"][checked]')["value"]


def test_the_checked_gpu_follows_the_advice_unless_the_user_chose_another(client, setup):
    _, token = setup()
    page = soup(client.get("/train", params=SMALL))
    advised = page.select_one('input[name="advised"]')["value"]
    assert checked(page) == advised and advised in {"cpu", "h100-sxm"}  # the fake executor's types
    other = ({"cpu", "h100-sxm"} - {advised}).pop()
    form = {**SMALL, "csrf_token": token}
    # Still checked from an earlier advice (the settings changed since): the advice's choice, so it follows it.
    assert checked(soup(client.post("/train", data={**form, "gpu": other, "advised": other}))) == advised
    # Chosen by the user (not what was advised): kept.
    assert checked(soup(client.post("/train", data={**form, "gpu": other, "advised": advised}))) == other
    # A type no worker here has (an old link) is never checked.
    assert checked(soup(client.get("/train", params={**SMALL, "gpu": "rtx-4090"}))) == advised


def test_only_types_that_run_here_are_recommended(client, setup):
    setup()
    larger = {**SMALL, "epochs": "300", "imgsz": "640", "batch": "16"}  # where a GPU not here would be cheapest
    for params in (SMALL, larger, {**larger, "deadline": "0.02"}, {**larger, "budget": "0.01"}):
        page = soup(client.get("/train", params=params))
        picked = {badge.find_parent("tr")["data-gpu"] for badge in page.select(".badge-pick")}
        assert picked and picked <= {"cpu", "h100-sxm"}, picked
        assert all(text(cell) != "0 s" for cell in page.select("#gpu-table td.num"))  # "0.3 s", "<0.1 s"


def test_train_opens_the_dialog_prefilled_from_home_dataset_project_and_model_pages(client, app, setup):
    _, token = setup()

    def dialog(href: str) -> Any:
        assert href.startswith("/train")
        return soup(client.get(href))

    def value(page: Any, name: str) -> str:
        field = page.select_one(f'[name="{name}"]')
        if field.name == "select":
            return field.select_one("option[selected]")["value"]
        return field.get("value", "")

    home = soup(client.get("/"))
    assert home.select_one("#train-empty-link")["href"] == "/train"  # no projects yet: the empty state leads on
    assert soup(client.get("/projects")).select_one("#train-empty-link")["href"] == "/train"
    opened = dialog(home.select_one("#train-link")["href"])  # the newest ready dataset, named after it
    assert (value(opened, "dataset"), value(opened, "project"), value(opened, "name")) == (DATASET, "shapes",
                                                                                        "yolo11n")
    dataset_page = soup(client.get("/datasets/alice/shapes"))
    assert dataset_page.select_one("#train-empty-link")  # no model trained on it yet
    assert value(dialog(dataset_page.select_one("#train-link")["href"]), "dataset") == DATASET
    assert launch(client, token).status_code == 303  # alice/p/m
    assert launch(client, token, project="shapes", name="yolo11n").status_code == 303
    assert value(dialog("/train"), "name") == "yolo11n-2"  # the suggested name is free in its project
    project = dialog(soup(client.get("/alice/p")).select_one("#train-link")["href"])
    assert (value(project, "project"), value(project, "name")) == ("p", "yolo11n")
    again = dialog(soup(client.get("/alice/p/m")).select_one("#train-link")["href"])
    assert [value(again, k) for k in ("dataset", "project", "model", "epochs", "imgsz", "batch")] == [
        DATASET, "p", "yolo11n.yaml", "2", "96", "4"]
    with app.state.lanner.db.session() as session:  # with weights, the model itself is the starting point
        session.execute(update(ModelRecord).where(ModelRecord.slug == "m").values(weights_sha256="0" * 64))
        session.commit()
    model_page = soup(client.get("/alice/p/m"))
    assert "from this model" in text(model_page.select_one("#train-link"))
    assert value(dialog(model_page.select_one("#train-link")["href"]), "model") == "ul://alice/p/m"


def test_a_count_of_gpus_prices_and_estimates_the_chosen_type_and_launches_that_many(client, app, setup):
    _, token = setup()
    one = soup(client.get("/train", params={**SMALL, "gpu": "h100-sxm"}))
    assert [o["value"] for o in one.select("#field-gpus option")] == [str(n) for n in range(1, 9)]  # Ray-like: any
    assert text(one.select_one("#chosen-price")) == "$3.29/h" and not one.select_one("#gpus-note")
    page = soup(client.get("/train", params={**SMALL, "gpu": "h100-sxm", "gpus": "2"}))
    assert page.select_one("#field-gpus option[selected]")["value"] == "2"
    assert text(page.select_one(".gpu-count dd")).endswith("GPUs")
    assert text(page.select_one("#chosen-price")) == "$6.58/h (2 × $3.29)"
    assert "$6.58/h (2 × $3.29)" in text(page.select_one('#gpu-table tr[data-gpu="h100-sxm"]'))
    assert not page.select('tr[data-gpu="cpu"]')  # the host trains on one device
    margin = text(page.select_one('#gpu-table tr[data-gpu="h100-sxm"] .memory-margin'))
    assert "batch 4 (2 per GPU) fits" in margin and "usable GB per GPU" in margin
    note = text(page.select_one("#gpus-note"))
    assert "an assumption until runs on several NVIDIA H100 SXM5 GPUs are measured" in note
    shown = next(text(dt.find_next_sibling("dd")) for dt in page.select("dt") if text(dt) == "Held at launch")
    assert launch(client, token, gpu="h100-sxm", gpus="2").status_code == 303
    with app.state.lanner.db.session() as session:
        run = session.scalars(select(Run)).one()
    assert (run.gpu_count, run.price_micros_per_hour) == (2, 2 * 3_290_000) and shown == money(run.hold_micros)


def test_the_cpu_offers_no_count_and_a_bad_count_is_shown(client, setup):
    setup()
    cpu = soup(client.get("/train", params={**SMALL, "gpu": "cpu"}))
    assert not cpu.select("#field-gpus") and cpu.select_one('input[type=hidden][name="gpus"]')["value"] == "1"
    bad = soup(client.get("/train", params={**SMALL, "gpu": "h100-sxm", "gpus": "9"}))
    assert "Enter a whole number from 1 to 8." in text(bad.select_one("#estimate"))
