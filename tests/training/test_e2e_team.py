"""End to end in a team's workspace, with the official SDK and the real trainer on the local executor: a dataset
one member uploads trains with ``data=ul://acme/datasets/parts`` in a run another member starts; the team's
ledger pays exactly the run's cost, no member's balance moves, the spend is reported per member, and a member
whose monthly budget it used up gets 402 naming the budget."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from ultralytics_platform import APIError, Platform

from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset
from tests.servers import lanner_cli, start_server, wait_for
from tests.training.orchestration import TRAIN_ARGS

pytestmark = pytest.mark.e2e
ARGS = {**TRAIN_ARGS, "data": "ul://acme/datasets/parts", "epochs": 1}


def cents(http: httpx.Client, key: str, owner: str | None = None) -> float:
    summary = http.get("/api/billing/usage-summary", params={"owner": owner} if owner else {},
                       headers={"Authorization": f"Bearer {key}"})
    summary.raise_for_status()
    return summary.json()["creditsCents"]


def test_a_member_trains_on_anothers_upload_and_the_team_pays_exactly(tmp_path: Any) -> None:
    home = tmp_path / "home"
    home.mkdir()
    keys = {}
    for name in ("olga", "ed", "ada"):
        lanner_cli(home, "users", "create", name)
        keys[name] = lanner_cli(home, "keys", "create", name)
    for name in ("ed", "ada"):
        lanner_cli(home, "credits", "add", name, "5")
    lanner_cli(home, "teams", "create", "acme", "--owner", "olga")
    for name in ("ed", "ada"):
        lanner_cli(home, "teams", "add", "acme", name, "--role", "editor")
    lanner_cli(home, "credits", "add", "acme", "5")
    server = start_server(home, LANNER_SUPERVISOR_INTERVAL_SECONDS="0.5")
    try:
        sdk = {n: Platform(base_url=server.url, api_key=k, timeout=60) for n, k in keys.items()}
        with httpx.Client(base_url=server.url, timeout=60) as http:
            auth = {n: {"Authorization": f"Bearer {k}"} for n, k in keys.items()}
            http.post("/api/datasets", json={"name": "parts", "owner": "acme"}, headers=auth["ed"]).raise_for_status()
            archive = package(make_detection_dataset(tmp_path / "parts", train=16, val=8, size=128).parent,
                              tmp_path / "zip")
            assert upload_dataset(sdk["ed"], http, "acme", "parts", archive, create=False)["status"] == "ready"
            sdk["ada"].projects.create(owner="acme", project="line", name="line", visibility="private")
            model_id = sdk["ada"].models.create(body={"project": "line", "model": "first", "name": "first",
                                                      "owner": "acme"})["id"]
            before = {n: cents(http, keys[n]) for n in ("ed", "ada")}
            team_before = cents(http, keys["olga"], "acme")

            started = sdk["ada"].training.start(model_id=model_id, gpu_type="cpu", train_args=ARGS)
            done = wait_for(lambda: (j := sdk["ada"].models.training("acme", "line", "first")["job"])["status"]
                            in ("completed", "failed") and j, timeout=400, what="the run to finish", every=1)
            assert done["status"] == "completed", done
            model = wait_for(lambda: (m := sdk["ed"].models.retrieve("acme", "line", "first")["model"]).get(
                "computeCost", {}).get("settled") and m, timeout=60, what="settlement")
            cost_micros = round(model["computeCost"]["totalCost"] * 1_000_000)
            assert cost_micros > 0 and model["hasWeights"] and len(model["trainResults"]) == 1

            assert round((team_before - cents(http, keys["olga"], "acme")) * 10_000) == cost_micros
            assert {n: cents(http, keys[n]) for n in ("ed", "ada")} == before  # nobody's own credit moved
            ledger = http.get("/api/billing/transactions", params={"owner": "acme"}, headers=auth["olga"]).json()
            charged = [t for t in ledger["transactions"] if t.get("runId") == str(started["runId"])
                       and t["kind"] == "charge"]
            assert -round(sum(t["amountCents"] for t in charged) * 10_000) == cost_micros
            assert http.get("/api/billing/transactions", params={"owner": "acme"},
                            headers=auth["ed"]).status_code == 403  # an editor: the team's ledger is an admin's
            spend = http.get("/api/teams/acme/spend", headers=auth["olga"]).json()
            by_member = {m["username"]: m["spentCents"] for m in spend["members"]}
            assert round(by_member["ada"] * 10_000) == cost_micros and by_member["ed"] == 0

            # ada's budget for the month is what she has spent: her next start is refused, naming it.
            http.patch("/api/teams/acme/members/ada", json={"monthlyBudgetCents": max(1, int(by_member["ada"]))},
                       headers=auth["olga"]).raise_for_status()
            second = sdk["ada"].models.create(body={"project": "line", "model": "second", "name": "second",
                                                    "owner": "acme"})["id"]
            with pytest.raises(APIError) as refused:
                sdk["ada"].training.start(model_id=second, gpu_type="cpu", train_args=ARGS)
            assert refused.value.status_code == 402 and refused.value.json["code"] == "budget_exceeded"
            assert "monthly budget" in refused.value.json["error"]
    finally:
        server.stop()
