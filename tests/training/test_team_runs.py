"""Runs in a team's workspace through ``training.start`` (the SDK): a dataset one member uploaded trains on a model
another member starts, the team's credit holds and pays for it while the members' own balances do not move,
a member past the monthly budget an admin set gets 402 naming it, and 20 simultaneous starts by 5 members
against team credit for 5 runs start exactly 5."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from ultralytics_platform import APIError

from lanner.billing import service as billing
from lanner.billing.models import LedgerPosting
from lanner.synthetic import make_detection_dataset
from lanner.training.models import Run
from tests.datasets.helpers import package, upload_dataset
from tests.training.test_start_api import backdate

ARGS = {"model": "yolo11n.yaml", "data": "ul://acme/datasets/parts", "epochs": 2, "imgsz": 96, "batch": 4}
MEMBERS = ("ed", "ada", "kim", "lou", "max")


@pytest.fixture
def acme(app: Any, client: Any, sdk: Any, make_account: Any, tmp_path: Path) -> dict[str, Any]:
    """Team acme (owner olga) with five editors, each with $10 of their own; ed uploads ul://acme/datasets/parts."""
    people = {"olga": make_account("olga")}
    people |= {n: make_account(n, credits_micros=10_000_000) for n in MEMBERS}
    olga = people["olga"].headers
    assert client.post("/api/teams", json={"name": "acme"}, headers=olga).status_code == 201
    for name in MEMBERS:
        assert client.post("/api/teams/acme/members", json={"username": name, "role": "editor"},
                           headers=olga).status_code == 201
    assert client.post("/api/datasets", json={"name": "parts", "owner": "acme"},
                       headers=people["ed"].headers).status_code == 201
    archive = package(make_detection_dataset(tmp_path / "parts", train=12, val=6, size=96).parent, tmp_path / "zip")
    upload_dataset(sdk(people["ed"]), client, "acme", "parts", archive, create=False)
    assert client.post("/api/projects", json={"name": "line", "owner": "acme"}, headers=olga).status_code == 201
    return people


def team_model(client: Any, member: Any, name: str) -> str:
    made = client.post("/api/models", json={"project": "line", "owner": "acme", "model": name, "name": name},
                       headers=member.headers)
    assert made.status_code == 201 and made.json()["owner"] == "acme", made.text
    return made.json()["id"]


def balances(app: Any, *names: str) -> dict[str, Any]:
    from lanner.accounts.service import require_user

    with app.state.lanner.db.session() as session:
        return {n: billing.balances(session, user_id=require_user(session, username=n).id) for n in names}


def hold_for_one(client: Any, member: Any) -> int:
    estimate = client.post("/api/training/estimate", headers=member.headers, json={
        "model": "yolo11n.yaml", "dataset": ARGS["data"], "gpuTypes": ["cpu"],
        "trainArgs": {k: v for k, v in ARGS.items() if k not in ("model", "data")}}).json()
    return billing.cents_to_micros(math.ceil(estimate["estimates"][0]["costCents"]["high"]))


def test_the_team_pays_for_a_run_a_member_starts_on_another_members_dataset(app, client, sdk, acme, fake_executor,
                                                                          supervisor, make_account):
    ada = acme["ada"]
    model_id = team_model(client, ada, "first")
    with pytest.raises(APIError) as poor:  # the team has no credit yet: its balance is what counts
        sdk(ada).training.start(model_id=model_id, gpu_type="cpu", train_args=ARGS)
    assert poor.value.status_code == 402
    with app.state.lanner.db.session() as session:
        from lanner.accounts.service import require_user

        billing.top_up(session, user_id=require_user(session, username="acme").id, micros=5_000_000)
    before = balances(app, *MEMBERS)
    started = sdk(ada).training.start(model_id=model_id, gpu_type="cpu", train_args=ARGS)
    assert started["billing"]["balanceCents"] == pytest.approx(500 - started["holdCents"])
    with app.state.lanner.db.session() as session:
        run = session.get(Run, started["runId"])
        assert run.started_by_id == ada.user_id and run.launch["project"] == "acme/line"
    supervisor.run_once()
    backdate(app, seconds=60)
    supervisor.run_once()
    assert client.delete("/api/models/acme/line/first/training", headers=ada.headers).status_code == 200
    supervisor.run_once()
    team = balances(app, "acme")["acme"]
    with app.state.lanner.db.session() as session:
        charged = billing.run_charged(session, started["runId"])
        assert charged >= 500_000 * 60 // 3600  # at least 60 s at $0.50/h
        assert session.scalar(select(func.sum(LedgerPosting.amount_micros))) == 0  # double entry balances
    assert team.held == 0 and team.available == 5_000_000 - charged
    assert balances(app, *MEMBERS) == before  # nobody's own credit moved

    eve = make_account("eve", credits_micros=10_000_000)  # outside the team: the model does not exist for her
    refused = client.post("/api/training/start", headers=eve.headers,
                          json={"modelId": model_id, "gpuType": "cpu", "trainArgs": ARGS})
    assert refused.status_code == 404


def test_a_member_past_the_monthly_budget_gets_402_naming_it(app, client, sdk, acme, fake_executor):
    hold = hold_for_one(client, acme["ed"])
    with app.state.lanner.db.session() as session:
        from lanner.accounts.service import require_user

        billing.top_up(session, user_id=require_user(session, username="acme").id, micros=50 * hold)
    budget_cents = hold // billing.MICROS_PER_CENT  # room for exactly one run
    set_budget = client.patch("/api/teams/acme/members/ed", json={"monthlyBudgetCents": budget_cents},
                              headers=acme["olga"].headers)
    assert set_budget.status_code == 200
    first = sdk(acme["ed"]).training.start(model_id=team_model(client, acme["ed"], "b1"), gpu_type="cpu",
                                           train_args=ARGS)
    assert first["holdCents"] > 0
    over = client.post("/api/training/start", headers=acme["ed"].headers,
                       json={"modelId": team_model(client, acme["ed"], "b2"), "gpuType": "cpu", "trainArgs": ARGS})
    assert over.status_code == 402, over.text
    body = over.json()
    assert body["code"] == "budget_exceeded" and "monthly budget" in body["error"]
    assert body["budgetCents"] == budget_cents and body["spentCents"] == pytest.approx(first["holdCents"])
    other = client.post("/api/training/start", headers=acme["ada"].headers,  # ada has no budget: she may
                        json={"modelId": team_model(client, acme["ada"], "b3"), "gpuType": "cpu", "trainArgs": ARGS})
    assert other.status_code == 200, other.text


def test_twenty_starts_by_five_members_against_team_credit_for_five(app, client, acme, fake_executor):
    hold = hold_for_one(client, acme["ed"])
    with app.state.lanner.db.session() as session:
        from lanner.accounts.service import require_user

        billing.top_up(session, user_id=require_user(session, username="acme").id, micros=5 * hold + hold // 2)
    starts = [(acme[name], team_model(client, acme[name], f"{name}{i}")) for name in MEMBERS for i in range(4)]
    results: list[int] = []
    barrier = threading.Barrier(len(starts))

    def go(member: Any, model_id: str) -> None:
        barrier.wait()
        response = client.post("/api/training/start", headers=member.headers,
                               json={"modelId": model_id, "gpuType": "cpu", "trainArgs": ARGS})
        results.append(response.status_code)

    threads = [threading.Thread(target=go, args=pair) for pair in starts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [200] * 5 + [402] * 15
    team = balances(app, "acme")["acme"]
    assert team.held == 5 * hold and team.available == hold // 2
    assert all(b.held == 0 and b.available == 10_000_000 for b in balances(app, *MEMBERS).values())


def test_the_activity_log_names_who_did_what_to_the_teams_things(app, client, sdk, acme, fake_executor, supervisor):
    """Every create, trash, restore, delete, start and cancel in the team's workspace is a line naming the member
    (written by one flush hook, lanner/teams/activity.py); a person's own workspace gets none."""
    with app.state.lanner.db.session() as session:
        from lanner.accounts.service import require_user

        billing.top_up(session, user_id=require_user(session, username="acme").id, micros=5_000_000)
    ada, ed, olga = acme["ada"], acme["ed"], acme["olga"].headers
    model_id = team_model(client, ada, "logged")
    sdk(ada).training.start(model_id=model_id, gpu_type="cpu", train_args=ARGS)
    assert client.delete("/api/models/acme/line/logged/training", headers=ed.headers).status_code == 200
    supervisor.run_once()  # the worker is gone: the run ends and the model may go
    assert client.delete("/api/datasets/acme/parts", headers=ed.headers).status_code == 200
    assert client.delete("/api/models/acme/line/logged", headers=ada.headers).status_code == 200
    assert client.post("/api/projects", json={"name": "mine"}, headers=ada.headers).status_code == 201  # personal
    events = client.get("/api/teams/acme/activity", params={"limit": 100}, headers=olga).json()["events"]
    lines = [(e["actor"], e["action"], e["target"]) for e in reversed(events)
             if not e["target"].startswith(("team ", "user "))]  # the team's making and its members
    run_target = "run acme/line/logged"
    assert lines == [
        ("ed", "created", "dataset acme/parts"),
        ("olga", "created", "project acme/line"),
        (None, "topped_up", "credit $5.00"),  # by the operator: no member
        ("ada", "created", "model acme/line/logged"),
        ("ada", "started", run_target),
        ("ed", "cancelled", run_target),
        ("ed", "deleted", "dataset acme/parts"),
        ("ada", "deleted", "model acme/line/logged"),
    ]
    assert not any("mine" in t for _, _, t in lines)
    viewer = client.get("/api/teams/acme/activity", headers=ed.headers)  # an editor: admins only
    assert viewer.status_code == 403 and viewer.json()["requiredRole"] == "admin"
