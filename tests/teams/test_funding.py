"""Funding a team (issue 27 item 6: a new team had $0 and the web no way to fund it): an admin gives the team
credit from their own (``POST /api/teams/{team}/credit``: one debit in their ledger, one credit in the team's,
atomic, never below zero), and the operator tops a team up with ``lanner teams top-up TEAM AMOUNT``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from lanner.accounts import service as accounts
from lanner.accounts.principal import Principal
from lanner.teams import service

DOLLAR = 1_000_000


@pytest.fixture
def acme(app: Any, make_account: Callable[..., Any]) -> dict[str, Any]:
    """Team acme: olga owner ($30 of her own), ada admin ($5), ed editor ($20); eve outside ($20)."""
    people = {name: make_account(name, credits_micros=dollars * DOLLAR)
              for name, dollars in (("olga", 30), ("ada", 5), ("ed", 20), ("eve", 20))}
    with app.state.lanner.db.session() as session:
        olga = accounts.require_user(session, username="olga")
        service.create_team(session, name="acme", owner=olga)
        for name, role in (("ada", "admin"), ("ed", "editor")):
            service.add_member(session, Principal.of(olga), "acme", name, role)
    return people



def test_an_admin_funds_the_team_from_their_own_credit(client: Any, acme: dict[str, Any]) -> None:
    olga, ada, ed, eve = (acme[n] for n in ("olga", "ada", "ed", "eve"))
    funded = client.post("/api/teams/acme/credit", json={"amountCents": 1250}, headers=olga.headers)
    assert funded.status_code == 200, funded.text
    assert funded.json() == {"team": "acme", "amountCents": 1250, "availableCents": 1250.0,
                             "yourAvailableCents": 1750.0}
    spend = client.get("/api/teams/acme/spend", headers=ada.headers).json()
    assert spend["availableCents"] == 1250.0
    # one debit in olga's ledger, one credit in the team's
    mine = client.get("/api/billing/transactions", headers=olga.headers).json()["transactions"]
    theirs = client.get("/api/billing/transactions", params={"owner": "acme"}, headers=ada.headers).json()[
        "transactions"]
    assert [(t["kind"], t["amountCents"]) for t in mine][:1] == [("transfer", -1250.0)]
    assert [(t["kind"], t["amountCents"]) for t in theirs] == [("transfer", 1250.0)]
    # never below zero: ada has $5
    short = client.post("/api/teams/acme/credit", json={"amountCents": 501}, headers=ada.headers)
    assert short.status_code == 402 and "$5.00" in short.json()["error"]
    assert client.post("/api/teams/acme/credit", json={"amountCents": 500}, headers=ada.headers).status_code == 200
    assert client.post("/api/teams/acme/credit", json={"amountCents": 1}, headers=ada.headers).status_code == 402
    # an editor may not, an outsider gets the 404 of a missing team, nonsense amounts are 422
    assert client.post("/api/teams/acme/credit", json={"amountCents": 100}, headers=ed.headers).status_code == 403
    assert client.post("/api/teams/acme/credit", json={"amountCents": 100}, headers=eve.headers).status_code == 404
    for amount in (0, -5, "ten"):
        assert client.post("/api/teams/acme/credit", json={"amountCents": amount},
                           headers=olga.headers).status_code == 422
    assert client.get("/api/teams/acme/spend", headers=ada.headers).json()["availableCents"] == 1750.0
    events = client.get("/api/teams/acme/activity", headers=ada.headers).json()["events"]
    assert [(e["action"], e["target"]) for e in events if e["action"] == "funded"] == [
        ("funded", "credit $5.00"), ("funded", "credit $12.50")]


def test_the_operator_tops_a_team_up_at_the_command_line(app: Any, client: Any, acme: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from lanner.cli import app as cli_app
    from lanner.config import get_settings

    settings = app.state.lanner.settings
    monkeypatch.setenv("LANNER_HOME", str(settings.home))
    monkeypatch.setenv("LANNER_DATABASE_URL", settings.resolved_database_url)
    get_settings.cache_clear()
    try:
        done = CliRunner().invoke(cli_app, ["teams", "top-up", "acme", "25.50"])
        assert done.exit_code == 0, done.output
        assert done.stdout.strip() == "2550"
        again = CliRunner().invoke(cli_app, ["teams", "top-up", "acme", "1"])
        assert again.stdout.strip() == "2650"
        assert CliRunner().invoke(cli_app, ["teams", "top-up", "olga", "5"]).exit_code == 1  # a person: not a team
        assert CliRunner().invoke(cli_app, ["teams", "top-up", "acme", "-3"]).exit_code != 0
    finally:
        get_settings.cache_clear()
    assert client.get("/api/teams/acme/spend", headers=acme["ada"].headers).json()["availableCents"] == 2650.0
