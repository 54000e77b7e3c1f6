"""An invitation link opened by a person without an account (issue 27 item 6: only people who already had an
account could be invited). Signed out, the link shows the offer with a sign-in form; where the operator allows
sign-ups (``LANNER_SIGNUPS``) a new account is made, signed in and joined to the team in one step, otherwise the
page says to ask the operator for an account and nothing can be made. The browser run is
``test_invitation_signup_browser.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lanner.accounts import service as accounts
from lanner.accounts.principal import Principal
from lanner.teams import service
from tests.web.pages import PASSWORD, soup, text, token_of

HTML = {"Accept": "text/html"}


@pytest.fixture
def link(app: Any, make_account: Callable[..., Any]) -> str:
    """The path of a fresh editor invitation to team acme (olga's)."""
    make_account("olga", password=PASSWORD)
    with app.state.lanner.db.session() as session:
        olga = accounts.require_user(session, username="olga")
        service.create_team(session, name="acme", owner=olga, full_name="Acme Vision")
        _, token = service.invite(session, Principal.of(olga), "acme", "editor", 7)
    return f"/invitations/{token}"


def _signup(client: Any, link: str, **form: str) -> Any:
    token = token_of(client.get(f"{link}/signup").text)
    return client.post(f"{link}/signup", data={"csrf_token": token, **form}, headers=HTML, follow_redirects=False)


def test_without_sign_ups_the_link_says_to_ask_the_operator(app: Any, client: Any, link: str) -> None:
    assert app.state.lanner.settings.signups is False  # the default
    page = client.get(link, headers=HTML)
    assert page.status_code == 200 and page.headers["referrer-policy"] == "no-referrer"
    offer = soup(page)
    assert "Join acme" in text(offer.select_one("h1")) and "editor" in text(offer.select_one("main"))
    assert offer.select_one("form[action='/login'] input[name=next]")["value"] == link  # sign in, come back
    assert "ask its operator to create an account for you" in text(offer.select_one("#no-account"))
    assert offer.select_one(f"a[href='{link}/signup']") is None
    closed = client.get(f"{link}/signup", headers=HTML)
    assert closed.status_code == 403 and "ask its operator" in text(soup(closed).select_one("#no-account"))
    refused = _signup(client, link, username="nina", password="long enough")
    assert refused.status_code == 403
    with app.state.lanner.db.session() as session:
        assert accounts.get_user_by_username(session, username="nina") is None
    assert client.get("/invitations/inv_made-up", headers=HTML).status_code == 404


def test_with_sign_ups_a_new_person_joins_through_the_link(app: Any, client: Any, link: str) -> None:
    app.state.lanner.settings.signups = True
    offer = soup(client.get(link, headers=HTML))
    assert offer.select_one(f"a[href='{link}/signup']") is not None
    for form, field, error in (({"username": "", "password": "long enough"}, "username", "Choose a username"),
                               ({"username": "nina", "password": "short"}, "password", "at least 8"),
                               ({"username": "olga", "password": "long enough"}, "username", "is taken"),
                               ({"username": "No Way", "password": "long enough"}, "username", "lowercase")):
        refused = _signup(client, link, **form)
        assert refused.status_code == 422, form
        page = soup(refused)
        assert page.select_one(f"#field-{field}")["aria-invalid"] == "true"
        assert error in text(page.select_one(f"#field-{field}-error")), form
    joined = _signup(client, link, username="Nina", password="long enough")
    assert joined.status_code == 303 and joined.headers["location"] == "/teams/acme"
    team = soup(client.get("/teams/acme"))  # signed in as nina by the sign-up
    assert "you joined team “acme” as editor" in text(team.select_one("#messages"))
    assert team.select_one('#member-list tr[data-member="nina"]') is not None
    again = client.get(link, headers=HTML)  # used: the one page of every spent link
    assert again.status_code == 404
    client.cookies.clear()
    assert client.post("/login", data={"username": "nina", "password": "long enough",
                                       "csrf_token": token_of(client.get("/login").text)},
                       follow_redirects=False).status_code == 303
