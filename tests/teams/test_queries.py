"""``teams.queries`` on both databases: pending invitations listed and revoked (admins), what a link offers (None
alike for unknown, used, revoked and expired), member ids, and the activity log paged by a (time, id) cursor that
neither skips nor repeats events written in the same instant."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from lanner.accounts import service as accounts
from lanner.accounts.principal import Principal
from lanner.db import utcnow
from lanner.errors import BadRequest, Forbidden, NotFound
from lanner.teams import queries, service
from lanner.teams.models import ActivityEvent, TeamInvitation


@pytest.fixture
def db(app: Any, make_account: Callable[..., Any]) -> Iterator[Any]:
    """Team acme: olga owner, ada admin, ed editor; eve outside."""
    for name in ("olga", "ada", "ed", "eve"):
        make_account(name)
    with app.state.lanner.db.session() as session:
        service.create_team(session, name="acme", owner=accounts.require_user(session, username="olga"))
        service.add_member(session, me(session, "olga"), "acme", "ada", "admin")
        service.add_member(session, me(session, "olga"), "acme", "ed", "editor")
        yield session


def me(session: Any, name: str) -> Principal:
    return Principal.of(accounts.require_user(session, username=name))


def test_invitations_pending_revoked_and_offered(db: Any) -> None:
    ada = me(db, "ada")
    _, used = service.invite(db, ada, "acme", "editor")
    _, open_token = service.invite(db, ada, "acme", "viewer", days=2)
    _, revoked = service.invite(db, ada, "acme", "admin")
    offer = queries.invitation_offer(db, open_token)
    assert offer is not None and (offer.team, offer.role) == ("acme", "viewer")
    service.accept(db, me(db, "eve"), used)
    pending = queries.pending_invitations(db, ada, "acme")
    assert [(p["role"], p["createdBy"]) for p in pending] == [("admin", "ada"), ("viewer", "ada")]
    queries.revoke_invitation(db, ada, "acme", pending[0]["id"])
    with pytest.raises(NotFound):  # revoked already
        queries.revoke_invitation(db, ada, "acme", pending[0]["id"])
    with pytest.raises(NotFound):
        queries.revoke_invitation(db, ada, "acme", "made-up")
    assert [p["role"] for p in queries.pending_invitations(db, ada, "acme")] == ["viewer"]
    with pytest.raises(NotFound):  # a revoked link: like an expired one
        service.accept(db, me(db, "eve"), revoked)
    db.execute(update(TeamInvitation).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert [queries.invitation_offer(db, t) for t in (used, open_token, revoked, "inv_made-up")] == [None] * 4
    assert queries.pending_invitations(db, ada, "acme") == []
    with pytest.raises(Forbidden):
        queries.pending_invitations(db, me(db, "ed"), "acme")
    with pytest.raises(Forbidden):
        queries.revoke_invitation(db, me(db, "ed"), "acme", "made-up")
    outsider = Principal.of(accounts.create_user(db, username="zed"))
    with pytest.raises(NotFound):
        queries.pending_invitations(db, outsider, "acme")
    events = [e["action"] for e in queries.activity_page(db, ada, "acme", limit=50)[0]]
    assert events.count("invitation_revoked") == 1


def test_member_ids(db: Any) -> None:
    ids = queries.member_ids(db, me(db, "ed"), "acme")
    assert ids == {name: me(db, name).user_id for name in ("olga", "ada", "ed")}
    with pytest.raises(NotFound):
        queries.member_ids(db, me(db, "eve"), "acme")


def test_the_activity_log_pages_without_skipping_events_of_one_instant(db: Any) -> None:
    olga = me(db, "olga")
    for cents in range(9):
        service.set_budget(db, olga, "acme", "ed", cents)
    team_id = accounts.require_user(db, username="acme").id
    ids = list(db.scalars(select(ActivityEvent.id).where(ActivityEvent.owner_id == team_id)))
    same = utcnow().replace(microsecond=0)
    db.execute(update(ActivityEvent).where(ActivityEvent.id.in_(ids[3:9])).values(created_at=same))
    db.flush()
    everything = queries.activity_page(db, olga, "acme", limit=200)[0]
    seen, cursor = [], None
    while True:
        page, cursor = queries.activity_page(db, olga, "acme", limit=4, cursor=cursor)
        seen += page
        if cursor is None:
            break
    assert [e["id"] for e in seen] == [e["id"] for e in everything] and len(seen) == len(ids) == 12
    assert [e["at"] for e in seen] == sorted((e["at"] for e in seen), reverse=True)
    with pytest.raises(BadRequest):
        queries.activity_page(db, olga, "acme", cursor="2026-01-01T00:00:00~")
    with pytest.raises(BadRequest):
        queries.activity_page(db, olga, "acme", cursor="2026-01-01T00:00:00~" + "x" * 40)
    with pytest.raises(Forbidden):
        queries.activity_page(db, me(db, "ed"), "acme")
    with pytest.raises(NotFound):
        queries.activity_page(db, me(db, "eve"), "acme")
