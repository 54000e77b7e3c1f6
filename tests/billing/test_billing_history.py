"""The ledger as the account page reads it (``lanner.billing.history``), on SQLite and PostgreSQL: pages of
transactions whose balances agree with the billing API, holds, cost per run and spend per day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lanner.billing import history
from lanner.billing import service as billing
from lanner.projects import service as projects_service
from tests.ledger import DOLLAR, make_run, spend_on


def test_pages_of_transactions_carry_the_balance_after_each_like_the_api(app, client, make_account):
    alice = make_account("alice", credits_micros=20 * DOLLAR)
    db = app.state.lanner.db
    run_id, model_id = make_run(db, alice.user_id)
    spend_on(db, alice.user_id, run_id, model_id, hold=5 * DOLLAR, charge=1_234_567)
    with app.state.lanner.db.session() as session:
        for i in range(5):
            billing.top_up(session, user_id=alice.user_id, micros=(i + 1) * DOLLAR, description=f"top-up {i}")
    api = client.get("/api/billing/transactions", headers=alice.headers).json()["transactions"]
    with app.state.lanner.db.session() as session:
        assert history.transaction_count(session, user_id=alice.user_id) == len(api) == 9
        pages = [history.transaction_page(session, user_id=alice.user_id, offset=o, limit=4) for o in (0, 4, 8)]
    entries = [e for page in pages for e in page]
    assert [len(p) for p in pages] == [4, 4, 1]
    assert [e.transaction.id for e in entries] == [t["id"] for t in api]  # same order, nothing skipped or repeated
    assert [e.balance_after / 10_000 for e in entries] == [t["balanceAfter"] for t in api]
    assert entries[-1].balance_after == 20 * DOLLAR  # the oldest: the initial credit


def test_holds_costs_and_spend_per_day(app, make_account):
    alice = make_account("alice", credits_micros=50 * DOLLAR)
    bob = make_account("bob", credits_micros=50 * DOLLAR)
    db = app.state.lanner.db
    done, done_model = make_run(db, alice.user_id, model="done")
    running, running_model = make_run(db, alice.user_id, model="running")
    spend_on(db, alice.user_id, done, done_model, hold=4 * DOLLAR, charge=3 * DOLLAR,
             at=datetime.now(UTC) - timedelta(days=1))
    spend_on(db, alice.user_id, running, running_model, hold=6 * DOLLAR, charge=DOLLAR // 2, settle=False)
    theirs, theirs_model = make_run(db, bob.user_id, project="q")
    spend_on(db, bob.user_id, theirs, theirs_model, hold=DOLLAR, charge=DOLLAR, settle=False)
    with app.state.lanner.db.session() as session:
        holds = history.active_holds(session, user_id=alice.user_id)
        costs = history.run_costs(session, user_id=alice.user_id)
        days = history.daily_spend(session, user_id=alice.user_id, days=7)
        refs = projects_service.model_refs(session, {done_model, theirs_model}, owner_id=alice.user_id)
    assert [(h.run_id, h.micros, h.model_id) for h in holds] == [(running, 6 * DOLLAR - DOLLAR // 2, running_model)]
    assert [(c.run_id, c.micros) for c in costs] == [(running, DOLLAR // 2), (done, 3 * DOLLAR)]
    assert len(days) == 7 and days[-1][0] == datetime.now(UTC).date()
    assert [micros for _, micros in days[-2:]] == [3 * DOLLAR, DOLLAR // 2] and sum(m for _, m in days[:-2]) == 0
    assert set(refs) == {done_model}  # bob's model is not alice's to name
    assert (refs[done_model].owner, refs[done_model].project_slug, refs[done_model].slug) == ("alice", "p", "done")
