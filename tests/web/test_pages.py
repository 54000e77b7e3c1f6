"""The pages in-process: who may see what, forms with errors next to their fields, the key shown once, the
account's figures, fragments for htmx, errors as pages, and markup the CSP allows."""

from __future__ import annotations

import json
import re

import pytest

from lanner.accounts.sessions import SESSION_COOKIE
from lanner.billing import service as billing
from lanner.web.templating import FLASH_COOKIE
from tests.web.pages import PASSWORD, sign_in, soup, text, token_of

PAGES = ("/", "/account", "/account/keys", "/account/live")
DOLLAR = 1_000_000


@pytest.fixture
def alice(make_account):
    return make_account("alice", password=PASSWORD, credits_micros=20 * DOLLAR)


@pytest.mark.parametrize("path", PAGES)
def test_signed_out_visitors_go_to_the_sign_in_page_and_come_back(client, alice, path):
    response = client.get(path, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == ("/login" if path == "/" else f"/login?next={path}")
    htmx = client.get(path, headers={"HX-Request": "true"}, follow_redirects=False)
    assert htmx.status_code == 204 and htmx.headers["hx-redirect"] == response.headers["location"]


def test_signing_in_goes_on_to_next_and_never_to_another_site(client, alice):
    token = token_of(client.get("/login?next=/account/keys").text)
    form = {"username": "alice", "password": PASSWORD, "csrf_token": token}
    done = client.post("/login", data={**form, "next": "/account/keys"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/account/keys"
    assert client.get("/login?next=/account", follow_redirects=False).headers["location"] == "/account"
    for evil in ("//evil.example/x", "https://evil.example", "/\\evil.example"):
        client.cookies.delete(SESSION_COOKIE)
        gone = client.post("/login", data={**form, "next": evil}, follow_redirects=False)
        assert gone.headers["location"] == "/"


def test_sign_in_errors_are_next_to_their_fields(client, alice):
    token = token_of(client.get("/login").text)
    empty = client.post("/login", data={"username": "alice", "password": "", "csrf_token": token})
    assert empty.status_code == 422
    page = soup(empty)
    password = page.select_one("#field-password")
    assert password["aria-invalid"] == "true"
    assert text(page.select_one(f"#{password['aria-describedby']}")) == "Enter your password."
    assert page.select_one("#field-username")["value"] == "alice"  # what was typed stays
    wrong = client.post("/login", data={"username": "alice", "password": "wrong password", "csrf_token": token})
    assert wrong.status_code == 401
    assert "Wrong username or password." in text(soup(wrong).select_one(".form-error"))
    assert SESSION_COOKIE not in client.cookies


def test_sign_out_ends_the_session_and_says_so(client, alice):
    token = sign_in(client)
    cookie = client.cookies[SESSION_COOKIE]
    out = client.post("/logout", data={"csrf_token": token}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    login = client.get("/login")
    assert "You are signed out." in text(soup(login).select_one("#messages"))
    assert "You are signed out." not in client.get("/login").text  # shown once
    client.cookies.set(SESSION_COOKIE, cookie)  # a copy of the cookie no longer works
    assert client.get("/", follow_redirects=False).status_code == 303


def test_a_forged_message_cookie_is_ignored(client, alice):
    sign_in(client)
    client.cookies.set(FLASH_COOKIE, "W3sia2luZCI6ICJlcnJvciIsICJtZXNzYWdlIjogImV2aWwifV0.abc")
    assert "evil" not in client.get("/").text


def test_home_lists_only_the_users_own_datasets_and_projects(client, alice, make_account):
    bob = make_account("bob", password=PASSWORD)
    client.post("/api/datasets", json={"name": "Shapes"}, headers=alice.headers)
    client.post("/api/projects", json={"name": "Detector"}, headers=alice.headers)
    client.post("/api/datasets", json={"name": "Bobs secret", "visibility": "public"}, headers=bob.headers)
    client.post("/api/projects", json={"name": "Bobs project"}, headers=bob.headers)
    sign_in(client)
    page = soup(client.get("/"))
    datasets = page.select("#dataset-list tbody tr")
    assert [text(row.select_one("a")) for row in datasets] == ["Shapes"]
    assert datasets[0].select_one("a")["href"] == "/datasets/alice/shapes"
    assert [td.get_text(strip=True) for td in datasets[0].select("td")][2:] == ["0", "ready"]
    projects = page.select("#project-list tbody tr")
    assert [(text(r.select_one("a")), r.select_one("a")["href"]) for r in projects] == [("Detector", "/alice/detector")]
    assert "Bobs" not in page.get_text()
    nav = {a.get_text(strip=True): a["href"] for a in page.select("header nav a")}
    assert nav == {"Home": "/", "Datasets": "/datasets", "Projects": "/projects", "Workflows": "/workflows",
                   "GPUs": "/gpus"}
    assert page.select_one('header nav a[aria-current="page"]')["href"] == "/"
    assert "$20.00" in text(page.select_one(".stat"))


def test_a_key_is_shown_once_then_only_its_prefix(client, alice):
    token = sign_in(client)
    created = client.post("/account/keys", data={"name": "laptop", "csrf_token": token})
    assert created.status_code == 201 and created.headers["cache-control"] == "no-store"
    page = soup(created)
    key = page.select_one("#new-key")["value"]
    assert re.fullmatch(r"ul_[0-9a-f]{40}", key)
    assert page.select_one('[data-copy="new-key"]') is not None
    assert client.get("/api/account/summary", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    later = client.get("/account/keys")
    assert key not in later.text and key[:7] in later.text
    rows = soup(later).select("#key-list tbody tr")
    assert [text(r.select_one("td")) for r in rows] == ["default", "laptop"]


def test_a_key_needs_a_name_said_next_to_the_field(client, alice):
    token = sign_in(client)
    refused = client.post("/account/keys", data={"name": "  ", "csrf_token": token})
    assert refused.status_code == 422
    field = soup(refused).select_one("#field-name")
    assert field["aria-invalid"] == "true"
    assert "Give the key a name" in text(soup(refused).select_one(f"#{field['aria-describedby'].split()[0]}"))
    too_long = client.post("/account/keys", data={"name": "x" * 101, "csrf_token": token})
    assert too_long.status_code == 422 and "at most 100" in too_long.text


def test_revoking_a_key_stops_it_at_once_and_only_the_owner_can(client, alice, make_account):
    bob = make_account("bob")
    token = sign_in(client)
    created = soup(client.post("/account/keys", data={"name": "ci", "csrf_token": token}))
    key = created.select_one("#new-key")["value"]
    key_id = client.get("/api/api-keys", headers=alice.headers).json()["keys"][-1]["keyId"]
    bobs_key_id = client.get("/api/api-keys", headers=bob.headers).json()["keys"][0]["keyId"]
    done = client.post(f"/account/keys/{key_id}/revoke", data={"csrf_token": token}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/account/keys"
    page = soup(client.get("/account/keys"))
    assert "revoked" in text(page.select_one("#messages")) and "ci" not in text(page.select_one("#key-list"))
    assert client.get("/api/account/summary", headers={"Authorization": f"Bearer {key}"}).status_code == 401
    htmx = client.post(f"/account/keys/{bobs_key_id}/revoke", headers={"HX-Request": "true", "X-CSRFToken": token})
    assert htmx.status_code == 200 and "already revoked" in htmx.text and "<html" not in htmx.text
    assert client.get("/api/account/summary", headers=bob.headers).status_code == 200


def test_the_keys_form_with_htmx_gets_the_fragment_it_swaps(client, alice):
    token = sign_in(client)
    headers = {"HX-Request": "true", "X-CSRFToken": token}
    created = client.post("/account/keys", data={"name": "ci"}, headers=headers)
    assert created.status_code == 201 and created.headers["vary"] == "HX-Request"
    fragment = soup(created)
    assert fragment.select_one("div#keys") is not None and fragment.select_one("html, header") is None
    assert fragment.select_one("#new-key")["value"].startswith("ul_")


def _top_ups(app, account, count: int) -> None:
    with app.state.lanner.db.session() as session:
        for i in range(count):
            billing.top_up(session, user_id=account.user_id, micros=(i + 1) * 10_000, description=f"top-up {i}")


def test_the_account_page_shows_credit_transactions_page_by_page_and_the_chart(app, client, alice):
    _top_ups(app, alice, 24)  # with the initial credit: 25 transactions, two pages of 20
    sign_in(client)
    page = soup(client.get("/account"))
    figures = {text(s.select_one(".label")): text(s.select_one(".value")) for s in page.select(".stat")}
    assert figures["Available"] == "$23.00" and figures["Held"] == "$0.00" and figures["Balance"] == "$23.00"
    rows = page.select("#transactions tbody tr")
    assert len(rows) == 20
    first = [td.get_text(" ", strip=True) for td in rows[0].select("td")]
    assert first[1:] == ["topup", "top-up 23", "+$0.24", "$23.00"]
    assert "Page 1 of 2" in text(page.select_one(".pagination"))
    chart = json.loads(page.select_one("#spend-chart")["data-chart"])
    assert len(chart["x"]) == len(chart["spend"]) == 30 and sum(chart["spend"]) == 0
    second = client.get("/account?page=2", headers={"HX-Request": "true"})
    fragment = soup(second)
    assert fragment.select_one("section#transactions") is not None and fragment.select_one(".stat") is None
    last = [td.get_text(" ", strip=True) for td in fragment.select("tbody tr")[-1].select("td")]
    assert last[1:] == ["topup", "Initial credits", "+$20.00", "$20.00"]
    assert "Page 2 of 2" in text(fragment.select_one(".pagination"))
    assert client.get("/account?page=99").status_code == 200  # past the end: the last page


def test_the_account_page_shows_only_the_users_own_ledger(app, client, alice, make_account):
    bob = make_account("bob", credits_micros=99 * DOLLAR)
    sign_in(client)
    page = client.get("/account").text
    assert "$99.00" not in page and "$20.00" in page
    assert client.get(f"/account?user={bob.username}").text.count("$99.00") == 0


def test_errors_are_pages_for_browsers_and_json_for_the_api(client, alice):
    page = client.get("/no/such/page/here", headers={"Accept": "text/html"})
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "Not found" in text(soup(page).select_one("h1"))
    api = client.get("/api/no-such-thing", headers={"Accept": "text/html"})
    assert api.status_code == 404 and api.json()["code"] == "http_error"
    assert client.get("/no/such/page/here").json()["error"] == "not found"  # a script asked
    sign_in(client)
    bad = client.get("/account?page=abc", headers={"Accept": "text/html"})
    assert bad.status_code == 422 and "page" in text(soup(bad).select_one("main p"))


@pytest.mark.parametrize("path", ["/login", "/", "/account", "/account/keys"])
def test_pages_hold_nothing_the_csp_would_block(client, alice, path):
    """No inline script, no style attribute, no inline event handler: the policy is default-src 'self'."""
    if path != "/login":
        sign_in(client)
    response = client.get(path)
    assert response.status_code == 200 and "default-src 'self'" in response.headers["content-security-policy"]
    page = soup(response)
    assert all(script.get("src", "").startswith("/static/") for script in page.select("script"))
    assert page.select("style, [style]") == []
    assert [a for tag in page.find_all(True) for a in tag.attrs if a.startswith("on")] == []
    token = token_of(response.text)
    assert [f.select_one("input[name=csrf_token]")["value"] for f in page.select("form[method=post]")] == [
        token] * len(page.select("form[method=post]"))  # every form that posts carries the token (no JS needed)
    labelled = {label["for"] for label in page.select("label[for]")}
    unlabelled = [i.get("name") for i in page.select("input:not([type=hidden]), select, textarea")
                  if i.get("id") not in labelled]
    assert unlabelled == []


def test_static_files_are_versioned_and_cached_for_a_year(client, alice):
    page = soup(client.get("/login"))
    css = page.select_one('link[rel="stylesheet"]')["href"]
    assert re.fullmatch(r"/static/lanner\.css\?v=[0-9a-f]{12}", css)
    versioned = client.get(css)
    assert versioned.status_code == 200 and "immutable" in versioned.headers["cache-control"]
    assert client.get("/static/lanner.css").headers["cache-control"] == "no-cache"
    scripts = [s["src"] for s in page.select("script")]
    assert any("/static/vendor/htmx-2.0.11.min.js?v=" in s for s in scripts)
    for vendored in ("htmx-2.0.11.LICENSE", "uPlot-1.6.32.LICENSE"):
        assert client.get(f"/static/vendor/{vendored}").status_code == 200
