"""The team pages in-process: your teams and creating one; a team's page as each role sees it (a viewer no admin
control, an admin the member controls but not the owner-only ones, an owner all); a non-member's 404 exactly
like a missing team's; the forms (add, role and budget, remove, leave, invitation links, revoke) with their
errors; a removed member locked out on the next request; the invitation page, one page for an unknown, used,
revoked or expired link; the activity log (admins) page by page; the workspace lists of a team; and markup the
CSP allows. The browser run is ``test_team_browser.py``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from lanner.accounts import service as accounts
from lanner.accounts.principal import Principal
from lanner.billing import service as billing
from lanner.db import utcnow
from lanner.teams import queries, service
from lanner.teams.models import TeamInvitation
from lanner.training.models import Run
from tests.ledger import DOLLAR, make_run, spend_on
from tests.web.pages import PASSWORD, sign_in, soup, text, token_of

HTML = {"Accept": "text/html"}


@pytest.fixture
def people(make_account: Callable[..., Any]) -> dict[str, Any]:
    return {name: make_account(name, password=PASSWORD) for name in ("olga", "ada", "ed", "vic", "eve")}


@pytest.fixture
def acme(app: Any, people: dict[str, Any]) -> str:
    """Team acme: olga owner, ada admin, ed editor (a $50 monthly budget), vic viewer; eve is outside."""
    with app.state.lanner.db.session() as session:
        olga = accounts.require_user(session, username="olga")
        service.create_team(session, name="acme", owner=olga, full_name="Acme Vision")
        boss = Principal.of(olga)
        for name, role in (("ada", "admin"), ("ed", "editor"), ("vic", "viewer")):
            service.add_member(session, boss, "acme", name, role)
        service.set_budget(session, boss, "acme", "ed", 50 * DOLLAR)
    return "acme"


def as_user(client: Any, name: str) -> str:
    """Sign ``name`` in (instead of whoever was); returns the page's CSRF token."""
    client.cookies.clear()
    return sign_in(client, name)


def _post(client: Any, token: str, path: str, htmx: bool = False, **form: str) -> Any:
    headers = {"HX-Request": "true", "X-CSRFToken": token} if htmx else HTML
    return client.post(path, data={"csrf_token": token, **form}, headers=headers, follow_redirects=False)


def _members(page: Any) -> dict[str, list[str]]:
    return {row["data-member"]: [text(td) for td in row.select("td")] for row in page.select("#member-list tbody tr")}


def test_your_teams_and_creating_one(client: Any, people: dict[str, Any]) -> None:
    token = as_user(client, "olga")
    empty = soup(client.get("/teams"))
    assert "no team yet" in text(empty.select_one("main"))
    assert empty.select_one('.subnav a[aria-current="page"]')["href"] == "/teams"
    assert [a["href"] for a in soup(client.get("/account")).select(".subnav a")] == ["/account", "/account/keys",
                                                                                    "/teams"]
    made = _post(client, token, "/teams", name="Acme", full_name="Acme Vision")
    assert made.status_code == 303 and made.headers["location"] == "/teams/acme"
    page = soup(client.get("/teams/acme"))
    assert "created" in text(page.select_one("#messages")) and text(page.select_one("h1")) == "acme"
    assert [text(td) for td in soup(client.get("/teams")).select("#team-list tbody td")][:3] == [
        "acme Acme Vision", "owner", "Free"]
    for name, error in (("", "Give the team a name."), ("acme", "is taken"), ("olga", "is taken"),
                        ("Acme!", "is taken"), ("!!!", "at least one letter"), ("x" * 41, "at most 40")):
        refused = _post(client, token, "/teams", name=name)
        assert refused.status_code == 422, name
        field = soup(refused).select_one("#field-name")
        assert field["aria-invalid"] == "true" and error in text(soup(refused).select_one("#field-name-error"))
    assert [t["username"] for t in client.get("/api/account/summary", headers=people["olga"].headers)
            .json()["teams"]] == ["acme"]


def test_a_team_named_as_people_name_it_gets_a_slug_and_keeps_its_name(client: Any, people: dict[str, Any]) -> None:
    """``Acme Vision`` was refused (a username's rule); datasets slugify their names, and so do teams now."""
    token = as_user(client, "olga")
    made = _post(client, token, "/teams", name="Acme Vision")
    assert made.status_code == 303 and made.headers["location"] == "/teams/acme-vision"
    assert [text(td) for td in soup(client.get("/teams")).select("#team-list tbody td")][:2] == [
        "acme-vision Acme Vision", "owner"]
    again = _post(client, token, "/teams", name="ACME  vision")
    assert again.status_code == 422 and "“acme-vision” is taken" in text(soup(again).select_one("#field-name-error"))


def test_each_role_sees_its_controls_and_outsiders_a_missing_team(client: Any, acme: str) -> None:
    as_user(client, "vic")
    viewer = soup(client.get("/teams/acme"))
    assert list(_members(viewer)) == ["olga", "ada", "ed", "vic"]
    assert _members(viewer)["ed"][1:4] == ["editor", "$50.00", "–"]  # a viewer sees budgets, only their own spend
    assert _members(viewer)["vic"][3] == "$0.00"
    assert viewer.select("#member-list select, #member-list input, #add-member, #invite, #invitation-list") == []
    assert "Remove" not in text(viewer.select_one("#member-list"))
    assert viewer.select_one('a[href="/teams/acme/activity"]') is None and viewer.select_one(".stat") is None
    assert viewer.select_one('form[action="/teams/acme/leave"]') is not None
    assert {a["href"] for a in viewer.select(".team-links a")} == {"/datasets?owner=acme", "/projects?owner=acme"}

    as_user(client, "ada")
    admin = soup(client.get("/teams/acme"))
    rows = {r["data-member"]: r for r in admin.select("#member-list tbody tr")}
    assert rows["olga"].select("select, input, form") == []  # an owner's row is an owner's business
    assert [o["value"] for o in rows["ed"].select("select option")] == ["viewer", "editor", "admin"]
    assert rows["ed"].select_one("input[name=budget]")["value"] == "50.00"
    assert rows["vic"].select_one('form[action="/teams/acme/members/vic/remove"]') is not None
    assert rows["ada"].select_one('form[action$="/remove"]') is None  # yourself: Leave, below
    assert admin.select_one("#add-member") and admin.select_one("#invite")
    assert admin.select_one("#invitation-list") is None  # none pending
    assert "owner" not in [o["value"] for o in admin.select("#add-role option, #invite-role option")]
    assert admin.select_one('a[href="/teams/acme/activity"]') is not None
    assert "Team credit" in text(admin.select_one(".stat"))

    as_user(client, "olga")
    owner = soup(client.get("/teams/acme"))
    assert "owner" in [o["value"] for o in owner.select("#add-role option")]
    owner_rows = {r["data-member"]: r for r in owner.select("#member-list tbody tr")}
    assert [o["value"] for o in owner_rows["ada"].select("select option")][-1] == "owner"

    as_user(client, "eve")
    for path in ("/teams/acme", "/teams/acme/activity"):
        outside, missing = client.get(path, headers=HTML), client.get(path.replace("acme", "nope"), headers=HTML)
        assert outside.status_code == missing.status_code == 404
        assert outside.text == missing.text.replace("nope", "acme")
        assert text(soup(outside).select_one("h1")) == "Not found"
    as_user(client, "ed")
    low = client.get("/teams/acme/activity", headers=HTML)
    assert low.status_code == 403 and "admin" in text(soup(low).select_one("main"))  # as the API: role_required


def test_admins_manage_members_through_the_forms(client: Any, acme: str, people: dict[str, Any]) -> None:
    token = as_user(client, "ada")
    unknown = _post(client, token, "/teams/acme/members", username="nobody", role="editor")
    assert unknown.status_code == 422 and "not found" in text(soup(unknown).select_one("#field-username-error"))
    twice = _post(client, token, "/teams/acme/members", username="ed", role="viewer")
    assert twice.status_code == 422 and "already a member" in twice.text
    added = _post(client, token, "/teams/acme/members", username="Eve", role="editor")
    assert added.status_code == 303 and added.headers["location"] == "/teams/acme"
    assert _members(soup(client.get("/teams/acme")))["eve"][0] == "eve"

    changed = _post(client, token, "/teams/acme/members/eve", htmx=True, role="viewer", budget="12.5")
    fragment = soup(changed)
    assert changed.status_code == 200 and fragment.select_one("div#team") and fragment.select_one("html") is None
    assert "role viewer and a budget of $12.50" in text(fragment.select_one(".flash-success"))
    member = client.get("/api/teams/acme/members", headers=people["olga"].headers).json()["members"]
    assert {m["username"]: (m["role"], m["monthlyBudgetCents"]) for m in member}["eve"] == ("viewer", 1250)
    cleared = _post(client, token, "/teams/acme/members/eve", role="viewer", budget="")
    assert cleared.status_code == 303
    assert "no budget" in text(soup(client.get("/teams/acme")).select_one("#messages"))
    for bad in ("lots", "-5", "1.234", "2000000", "nan"):
        refused = _post(client, token, "/teams/acme/members/eve", role="viewer", budget=bad)
        assert refused.status_code == 422, bad
        assert soup(refused).select_one("#budget-eve")["aria-invalid"] == "true"
    assert _post(client, token, "/teams/acme/members/olga", role="viewer").status_code == 403  # an owner's role
    assert _post(client, token, "/teams/acme/members/ghost", role="viewer").status_code == 404
    assert _post(client, token, "/teams/acme/members/eve", role="owner").status_code == 403  # only owners make owners

    removed = _post(client, token, "/teams/acme/members/eve/remove", htmx=True)
    assert "their access has ended" in text(soup(removed).select_one(".flash-success"))
    assert "eve" not in _members(soup(removed))

    token = as_user(client, "olga")  # the last owner may not leave, nor step down
    refused = _post(client, token, "/teams/acme/leave")
    assert refused.status_code == 303 and refused.headers["location"] == "/teams/acme"
    assert "last owner" in text(soup(client.get("/teams/acme")).select_one(".flash-error"))
    demoted = _post(client, token, "/teams/acme/members/olga", htmx=True, role="admin")
    assert "last owner" in text(soup(demoted).select_one(".flash-error"))


def test_a_removed_member_loses_access_on_the_next_request(client: Any, acme: str, people: dict[str, Any]) -> None:
    token = as_user(client, "vic")
    assert client.get("/teams/acme").status_code == 200
    assert client.get("/datasets?owner=acme").status_code == 200
    vic_cookies = dict(client.cookies)
    with client.app.state.lanner.db.session() as session:
        service.remove_member(session, Principal.of(accounts.require_user(session, username="ada")), "acme", "vic")
    client.cookies.clear()
    client.cookies.update(vic_cookies)
    for path in ("/teams/acme", "/datasets?owner=acme", "/projects?owner=acme"):
        assert client.get(path, headers=HTML).status_code == 404, path
    assert _post(client, token, "/teams/acme/leave").status_code == 404
    assert client.get("/api/teams/acme/members", headers=people["vic"].headers).status_code == 404
    assert "acme" not in text(soup(client.get("/")).select_one("main"))


def test_a_member_leaves_with_a_confirm(client: Any, acme: str) -> None:
    token = as_user(client, "ed")
    form = soup(client.get("/teams/acme")).select_one('form[action="/teams/acme/leave"]')
    assert "Leave acme?" in form["hx-confirm"]
    left = _post(client, token, "/teams/acme/leave")
    assert left.status_code == 303 and left.headers["location"] == "/teams"
    assert "You left team" in text(soup(client.get("/teams")).select_one("#messages"))
    assert client.get("/teams/acme", headers=HTML).status_code == 404


def test_an_invitation_link_is_shown_once_and_works_once(app: Any, client: Any, acme: str) -> None:
    token = as_user(client, "ada")
    made = _post(client, token, "/teams/acme/invitations", role="editor", days="7")
    assert made.status_code == 201 and made.headers["referrer-policy"] == "no-referrer"
    link = soup(made).select_one("#invitation-link")["value"]
    assert link.startswith("http") and "/invitations/inv_" in link
    assert soup(made).select_one('[data-copy="invitation-link"]') is not None
    path = link[link.index("/invitations/"):]
    later = client.get("/teams/acme")
    assert path not in later.text and len(soup(later).select("#invitation-list tbody tr")) == 1
    for days in ("0", "31", "x", "365"):
        assert _post(client, token, "/teams/acme/invitations", role="editor", days=days).status_code == 422
    assert _post(client, token, "/teams/acme/invitations", role="owner", days="7").status_code == 403

    as_user(client, "eve")
    made_up = client.get("/invitations/inv_made-up", headers=HTML)
    assert made_up.status_code == 404 and "not valid" in text(soup(made_up).select_one("h1"))
    offer = client.get(path)
    assert offer.status_code == 200 and offer.headers["referrer-policy"] == "no-referrer"
    assert "Join acme" in text(soup(offer).select_one("h1")) and "editor" in text(soup(offer).select_one("main"))
    accept_token = token_of(offer.text)
    joined = client.post("/invitations/accept", data={"csrf_token": accept_token, "token": path.rsplit("/", 1)[1]},
                         headers=HTML, follow_redirects=False)
    assert joined.status_code == 303 and joined.headers["location"] == "/teams/acme"
    assert "You joined team “acme” as editor." in text(soup(client.get("/teams/acme")).select_one("#messages"))
    used = client.get(path, headers=HTML)
    assert used.status_code == 404 and used.text == made_up.text  # one page for every spent link
    again = client.post("/invitations/accept", data={"csrf_token": accept_token, "token": path.rsplit("/", 1)[1]},
                        headers=HTML)
    assert again.status_code == 404 and again.text == made_up.text

    token = as_user(client, "ada")
    second = soup(_post(client, token, "/teams/acme/invitations", role="viewer", days="1"))
    second_link = second.select_one("#invitation-link")["value"]
    revoke = second.select_one("#invitation-list form")["action"]
    done = _post(client, token, revoke, htmx=True)
    assert "revoked" in text(soup(done).select_one(".flash-success")) and not soup(done).select("#invitation-list")
    assert _post(client, token, revoke).status_code == 404  # already revoked: no such pending invitation
    third_link = soup(_post(client, token, "/teams/acme/invitations", role="viewer", days="1")).select_one(
        "#invitation-link")["value"]
    with app.state.lanner.db.session() as session:  # expire it
        session.execute(update(TeamInvitation).where(TeamInvitation.used_at.is_(None))
                        .values(expires_at=utcnow() - timedelta(seconds=1)))
    as_user(client, "vic")
    made_up = client.get("/invitations/inv_made-up", headers=HTML).text
    for spent in (path, second_link, third_link):  # used, revoked, expired: the made-up link's page
        answer = client.get(spent[spent.index("/invitations/"):], headers=HTML)
        assert answer.status_code == 404 and answer.text == made_up, spent


def test_a_member_opening_a_fresh_link_is_told_they_are_in(client: Any, acme: str) -> None:
    token = as_user(client, "ada")
    link = soup(_post(client, token, "/teams/acme/invitations", role="viewer", days="1")).select_one(
        "#invitation-link")["value"]
    page = soup(client.get(link[link.index("/invitations/"):]))
    assert "already a member" in text(page.select_one("main"))
    assert page.select_one("form[action='/invitations/accept']") is None


def test_the_activity_log_pages_newest_first_with_a_cursor(app: Any, client: Any, acme: str) -> None:
    with app.state.lanner.db.session() as session:
        boss = Principal.of(accounts.require_user(session, username="olga"))
        for cents in range(60):
            service.set_budget(session, boss, "acme", "vic", cents * 10_000)
        total = len(queries.activity_page(session, boss, "acme", limit=200)[0])
    as_user(client, "ada")
    first = soup(client.get("/teams/acme/activity"))
    rows = first.select("#activity-list tbody tr")
    assert len(rows) == 50
    cells = [text(td) for td in rows[0].select("td")]
    assert cells[1:] == ["olga", "set the monthly budget of", "user vic", "$0.59 a month"]
    older = first.select_one('a[rel="next"]')["href"]
    second = soup(client.get(older))
    more = second.select("#activity-list tbody tr")
    assert len(rows) + len(more) == total and second.select_one('a[rel="next"]') is None
    seen = [text(r.select_one("td:nth-of-type(5)")) for r in [*rows, *more] if r["data-action"] == "budget_set"]
    assert seen[:60] == [f"${c / 100:,.2f} a month" for c in reversed(range(60))]  # none skipped, none twice
    assert [r["data-action"] for r in more][-1] == "created"  # the oldest: the team's creation
    assert second.select_one('.pagination a[href="/teams/acme/activity"]') is not None
    assert client.get("/teams/acme/activity?cursor=nonsense", headers=HTML).status_code == 400
    assert client.get("/teams/acme/activity?cursor=" + "x" * 81, headers=HTML).status_code == 422


def test_a_team_workspace_lists_its_datasets_and_projects(app: Any, client: Any, acme: str,
                                                          people: dict[str, Any]) -> None:
    editor = people["ed"].headers
    assert client.post("/api/datasets", json={"name": "Parts", "owner": "acme"}, headers=editor).status_code == 201
    assert client.post("/api/projects", json={"name": "Detector", "owner": "acme"}, headers=editor).status_code == 201
    client.post("/api/datasets", json={"name": "Mine"}, headers=editor)
    token = as_user(client, "ed")
    datasets = soup(client.get("/datasets?owner=acme"))
    assert [a["href"] for a in datasets.select("#dataset-list .ds-name")] == ["/datasets/acme/parts"]
    switcher = {text(a): a["href"] for a in datasets.select(".workspaces a")}
    assert switcher == {"ed (personal)": "/datasets", "acme": "/datasets?owner=acme"}
    assert datasets.select_one('.workspaces a[aria-current="page"]')["href"] == "/datasets?owner=acme"
    assert [a["href"] for a in soup(client.get("/datasets")).select("#dataset-list .ds-name")] == ["/datasets/ed/mine"]
    projects = soup(client.get("/projects?owner=acme"))
    assert [a["href"] for a in projects.select("#project-list a")][-1] == "/acme/detector"
    home = soup(client.get("/"))
    assert [a["href"] for a in home.select("#team-list a")] == ["/teams/acme", "/datasets?owner=acme",
                                                                "/projects?owner=acme"]
    made = _post(client, token, "/datasets", name="Bolts", owner="acme")  # the team's list creates in the team
    assert made.status_code == 303 and made.headers["location"] == "/datasets/acme/bolts"
    as_user(client, "ada")  # the activity log names who made what, through the API or a page
    created = {text(r.select_one("td:nth-of-type(4)")): text(r.select_one("td:nth-of-type(2)"))
               for r in soup(client.get("/teams/acme/activity")).select('#activity-list tr[data-action="created"]')}
    assert created == {"dataset acme/bolts": "ed", "dataset acme/parts": "ed", "project acme/detector": "ed",
                       "team acme": "olga"}
    token = as_user(client, "vic")
    assert soup(client.get("/datasets?owner=acme")).select_one("#new-dataset") is None
    assert _post(client, token, "/datasets", name="Nope", owner="acme").status_code == 403  # a viewer
    as_user(client, "eve")
    for path in ("/datasets?owner=acme", "/projects?owner=acme", "/datasets?owner=olga"):
        outside = client.get(path, headers=HTML)
        missing = client.get(path.rsplit("=", 1)[0] + "=ghost", headers=HTML)
        assert outside.status_code == missing.status_code == 404, path
        assert outside.text == missing.text.replace("ghost", path.rsplit("=", 1)[1])
    assert soup(client.get("/datasets")).select(".workspaces") == []  # in no team: no switcher


def test_spend_this_month_per_member(app: Any, client: Any, acme: str) -> None:
    db = app.state.lanner.db
    with db.session() as session:
        team = accounts.require_user(session, username="acme")
        ed = accounts.require_user(session, username="ed")
        billing.top_up(session, user_id=team.id, micros=30 * DOLLAR, description="team credit")
        team_id, ed_id = team.id, ed.id
    run_id, model_id = make_run(db, team_id, project="p", model="m")
    with db.session() as session:
        session.execute(update(Run).where(Run.id == run_id).values(started_by_id=ed_id))
    spend_on(db, team_id, run_id, model_id, hold=5 * DOLLAR, charge=3_250_000)
    as_user(client, "ada")
    members = _members(soup(client.get("/teams/acme")))
    assert members["ed"][3] == "$3.25" and members["vic"][3] == "$0.00"
    assert "$26.75" in text(soup(client.get("/teams/acme")).select_one(".stat"))
    as_user(client, "ed")
    assert _members(soup(client.get("/teams/acme")))["ed"][3] == "$3.25"


@pytest.mark.parametrize("path", ["/teams", "/teams/acme", "/teams/acme/activity", "INVITATION"])
def test_team_pages_hold_nothing_the_csp_would_block(client: Any, acme: str, path: str) -> None:
    token = as_user(client, "olga")
    if path == "INVITATION":
        link = soup(_post(client, token, "/teams/acme/invitations", role="viewer", days="1")).select_one(
            "#invitation-link")["value"]
        as_user(client, "eve")
        path = link[link.index("/invitations/"):]
    response = client.get(path)
    assert response.status_code == 200
    page = soup(response)
    assert all(script.get("src", "").startswith("/static/") for script in page.select("script"))
    assert page.select("style, [style]") == []
    assert [a for tag in page.find_all(True) for a in tag.attrs if a.startswith("on")] == []
    token = token_of(response.text)
    posting = page.select("form[method=post]")
    assert [f.select_one("input[name=csrf_token]")["value"] for f in posting] == [token] * len(posting)
    labelled = {label["for"] for label in page.select("label[for]")}
    assert [i.get("name") for i in page.select("input:not([type=hidden]), select, textarea")
            if i.get("id") not in labelled] == []
    ids = [tag["id"] for tag in page.select("[id]")]
    assert len(ids) == len(set(ids))


def test_a_teams_dataset_page_offers_editing_to_its_editors_only(client: Any, people: dict[str, Any],
                                                               acme: str) -> None:
    """The permission table decides the dataset page's controls: an editor annotates and runs the assistant on
    the team's dataset, a viewer reads it without them, an outsider gets the 404 page."""
    client.post("/api/datasets", json={"name": "parts", "owner": acme},
                headers=people["ed"].headers).raise_for_status()
    as_user(client, "ed")
    page = soup(client.get(f"/datasets/{acme}/parts", headers=HTML))
    assert page.select_one("#annotate-link") is not None
    assert client.get(f"/datasets/{acme}/parts/annotate", headers=HTML).status_code == 200
    as_user(client, "vic")
    seen = client.get(f"/datasets/{acme}/parts", headers=HTML)
    assert seen.status_code == 200 and soup(seen).select_one("#annotate-link") is None
    as_user(client, "eve")
    assert client.get(f"/datasets/{acme}/parts", headers=HTML).status_code == 404


def test_a_teams_trash_page_lists_its_datasets_and_lets_its_editors_restore(client: Any, people: dict[str, Any],
                                                                            acme: str) -> None:
    """Deleting a team's dataset from its page leads to the team's trash; a viewer sees it without a restore
    button (and a restore posted anyway is refused with the role), an editor restores it and comes back to the
    team's trash; an outsider gets the 404 page of a missing workspace."""
    client.post("/api/datasets", json={"name": "parts", "owner": acme}, headers=people["ed"].headers).raise_for_status()
    client.post("/api/datasets", json={"name": "mine"}, headers=people["ed"].headers).raise_for_status()
    client.delete("/api/datasets/ed/mine", headers=people["ed"].headers).raise_for_status()
    token = as_user(client, "ed")
    assert soup(client.get("/datasets?owner=acme")).select_one('a[href="/datasets/trash?owner=acme"]') is not None
    gone = _post(client, token, f"/datasets/{acme}/parts/delete")
    assert gone.status_code == 303 and gone.headers["location"] == "/datasets/trash?owner=acme"
    page = soup(client.get("/datasets/trash?owner=acme"))
    assert [text(r.select_one("td")) for r in page.select("#trash-list tbody tr")] == ["parts parts"]
    assert page.select_one('.workspaces a[aria-current="page"]')["href"] == "/datasets/trash?owner=acme"
    assert [text(r.select_one("td")) for r in soup(client.get("/datasets/trash")).select("#trash-list tbody tr")] == [
        "mine mine"]
    dataset_id = page.select_one("#trash-list form")["action"].split("/")[3]

    token = as_user(client, "vic")
    seen = soup(client.get("/datasets/trash?owner=acme"))
    assert len(seen.select("#trash-list tbody tr")) == 1 and seen.select("#trash-list form") == []
    assert "takes the editor role" in text(seen.select_one(".page-header"))
    refused = _post(client, token, f"/datasets/trash/{dataset_id}/restore", owner=acme)
    assert refused.headers["location"] == "/datasets/trash?owner=acme"
    assert "editor" in text(soup(client.get("/datasets/trash?owner=acme")).select_one("#messages"))

    token = as_user(client, "ed")
    restored = _post(client, token, f"/datasets/trash/{dataset_id}/restore", owner=acme)
    assert restored.status_code == 303 and restored.headers["location"] == "/datasets/trash?owner=acme"
    after = soup(client.get("/datasets/trash?owner=acme"))
    assert "Dataset restored." in text(after.select_one("#messages")) and after.select("#trash-list") == []
    assert client.get(f"/api/datasets/{acme}/parts", headers=people["vic"].headers).status_code == 200
    as_user(client, "eve")
    assert client.get("/datasets/trash?owner=acme", headers=HTML).status_code == 404
