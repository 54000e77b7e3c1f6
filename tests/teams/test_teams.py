"""Teams in the service layer and at the command line: the permission table, members and roles (the last owner
kept, an admin never making owners), invitations (single use, expiring, 404 alike), leaving, the activity log
(admins only), and a team never signing in or holding keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from lanner.accounts import service as accounts
from lanner.accounts.principal import Principal
from lanner.db import utcnow
from lanner.errors import BadRequest, Conflict, Forbidden, NotFound
from lanner.teams import queries, service
from lanner.teams.models import TeamInvitation
from lanner.teams.permissions import ACTIONS, ROLES, allows, can


def test_the_permission_table_orders_the_roles_and_knows_every_action() -> None:
    expected = {"viewer": {"read"}, "editor": {"read", "write", "train", "delete"},
                "admin": {"read", "write", "train", "delete", "manage_members", "manage_billing", "transfer"},
                "owner": set(ACTIONS)}
    for role in ROLES:
        assert {a for a in ACTIONS if allows(role, a)} == expected[role], role
    assert not any(allows(None, a) for a in ACTIONS)


@pytest.fixture
def people(app: Any, make_account: Callable[..., Any]) -> dict[str, Any]:
    return {name: make_account(name) for name in ("olga", "ada", "ed", "vic", "nobody")}


@pytest.fixture
def db(app: Any) -> Iterator[Any]:
    with app.state.lanner.db.session() as session:
        yield session


def me(db: Any, name: str) -> Principal:
    return Principal.of(accounts.require_user(db, username=name))


def test_members_roles_and_what_each_may_do(db: Any, people: dict[str, Any]) -> None:
    team = service.create_team(db, name="acme", owner=accounts.require_user(db, username="olga"), tier="pro")
    assert team.account_type == "team" and team.tier == "pro"
    olga = me(db, "olga")
    service.add_member(db, olga, "acme", "ada", "admin")
    service.add_member(db, me(db, "ada"), "acme", "ed", "editor")
    service.add_member(db, me(db, "ada"), "acme", "vic", "viewer")
    assert [(m["username"], m["role"]) for m in service.members(db, me(db, "vic"), "acme")] == [
        ("olga", "owner"), ("ada", "admin"), ("ed", "editor"), ("vic", "viewer")]
    for name, action, allowed in (("vic", "read", True), ("vic", "write", False), ("ed", "train", True),
                                  ("ed", "manage_members", False), ("ada", "manage_billing", True),
                                  ("ada", "delete_team", False), ("olga", "delete_team", True),
                                  ("nobody", "read", False)):
        assert can(db, user_id=me(db, name).user_id, owner_id=team.id, action=action) is allowed, (name, action)
    assert can(db, user_id=olga.user_id, owner_id=olga.user_id, action="delete_team")  # her own workspace

    with pytest.raises(Forbidden) as refused:  # an editor manages nobody: 403 naming the role needed
        service.add_member(db, me(db, "ed"), "acme", "nobody", "viewer")
    assert refused.value.extra == {"requiredRole": "admin"}
    with pytest.raises(NotFound):  # an outsider learns nothing, not even that the team exists
        service.members(db, me(db, "nobody"), "acme")
    with pytest.raises(NotFound):
        service.members(db, olga, "olga")  # a person's workspace is not a team
    with pytest.raises(Forbidden):  # an admin makes no owners
        service.set_role(db, me(db, "ada"), "acme", "ed", "owner")
    with pytest.raises(Conflict):  # the last owner stays
        service.set_role(db, olga, "acme", "olga", "admin")
    with pytest.raises(Conflict):
        service.remove_member(db, olga, "acme", "olga")
    with pytest.raises(Conflict):
        service.add_member(db, olga, "acme", "ed", "viewer")
    with pytest.raises(BadRequest):
        service.add_member(db, olga, "acme", "nobody", "superuser")
    with pytest.raises(NotFound):  # a team is not a person: it cannot be a member
        service.add_member(db, olga, "acme", "acme", "viewer")

    service.set_role(db, olga, "acme", "ed", "viewer")
    assert not can(db, user_id=me(db, "ed").user_id, owner_id=team.id, action="write")
    service.remove_member(db, me(db, "ada"), "acme", "ed")  # removed: no role at all, at once
    assert not can(db, user_id=me(db, "ed").user_id, owner_id=team.id, action="read")
    service.remove_member(db, me(db, "vic"), "acme", "vic")  # a viewer may leave
    assert [m["username"] for m in service.members(db, olga, "acme")] == ["olga", "ada"]

    log = queries.activity_page(db, me(db, "ada"), "acme", limit=100)[0]
    assert [(e["actor"], e["action"], e["target"]) for e in log] == [
        ("vic", "member_left", "user vic"), ("ada", "member_removed", "user ed"),
        ("olga", "role_changed", "user ed"), ("ada", "member_added", "user vic"),
        ("ada", "member_added", "user ed"), ("olga", "member_added", "user ada"), ("olga", "created", "team acme")]
    assert log[2]["detail"] == {"from": "editor", "to": "viewer"}
    service.add_member(db, olga, "acme", "vic", "viewer")
    with pytest.raises(Forbidden):  # the log names everyone's doings: admins only
        queries.activity_page(db, me(db, "vic"), "acme")
    assert [t["username"] for t in service.teams_of(db, me(db, "ada").user_id)] == ["acme"]
    assert service.teams_of(db, me(db, "ada").user_id)[0] | {"userId": ""} == {
        "userId": "", "username": "acme", "fullName": "acme", "iconLetter": "A", "plan": "pro", "region": "us",
        "role": "admin"}


def test_invitations_are_single_use_and_expire(db: Any, people: dict[str, Any]) -> None:
    service.create_team(db, name="acme", owner=accounts.require_user(db, username="olga"))
    olga = me(db, "olga")
    invitation, token = service.invite(db, olga, "acme", "editor")
    assert token.startswith("inv_") and invitation.digest != token
    team, member = service.accept(db, me(db, "ed"), token)
    assert team.username == "acme" and member.role == "editor"
    with pytest.raises(NotFound):  # used
        service.accept(db, me(db, "vic"), token)
    _, late = service.invite(db, olga, "acme", "viewer", days=1)
    db.execute(update(TeamInvitation).where(TeamInvitation.used_at.is_(None))
               .values(expires_at=utcnow() - timedelta(seconds=1)))
    with pytest.raises(NotFound):  # expired, answered like an unknown token
        service.accept(db, me(db, "vic"), late)
    with pytest.raises(NotFound):
        service.accept(db, me(db, "vic"), "inv_made-up")
    with pytest.raises(BadRequest):
        service.invite(db, olga, "acme", "viewer", days=31)
    with pytest.raises(Forbidden):  # an editor invites nobody
        service.invite(db, me(db, "ed"), "acme", "viewer")


def test_a_team_never_signs_in_or_holds_keys(db: Any, people: dict[str, Any]) -> None:
    team = service.create_team(db, name="acme", owner=accounts.require_user(db, username="olga"))
    with pytest.raises(Forbidden):
        accounts.create_api_key(db, user=team)
    with pytest.raises(Conflict):  # one namespace: a team takes a username
        service.create_team(db, name="olga", owner=team)


def test_the_operator_manages_teams_at_the_command_line(app: Any, people: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from lanner.cli import app as cli_app
    from lanner.config import get_settings

    settings = app.state.lanner.settings
    monkeypatch.setenv("LANNER_HOME", str(settings.home))
    monkeypatch.setenv("LANNER_DATABASE_URL", settings.resolved_database_url)
    get_settings.cache_clear()
    try:
        def run(*args: str) -> Any:
            return CliRunner().invoke(cli_app, list(args))

        created = run("teams", "create", "Acme", "--owner", "olga", "--tier", "pro")
        assert created.exit_code == 0 and created.stdout.strip() == "acme", created.output
        assert run("teams", "add", "acme", "ed", "--role", "editor").exit_code == 0
        assert run("teams", "members", "acme").stdout.splitlines() == ["olga\towner", "ed\teditor"]
        refused = run("teams", "add", "acme", "ed", "--role", "superuser")
        assert refused.exit_code == 1 and "role must be one of" in refused.output
        assert run("teams", "role", "acme", "ed", "--role", "admin").exit_code == 0
        invited = run("teams", "invite", "acme", "--role", "viewer")
        token = invited.stdout.strip()
        assert invited.exit_code == 0, invited.output
        assert token.startswith("inv_")
        assert run("teams", "remove", "acme", "ed").exit_code == 0
        assert run("teams", "members", "acme").stdout.splitlines() == ["olga\towner"]
        assert run("teams", "members", "nope").exit_code == 1
    finally:
        get_settings.cache_clear()
