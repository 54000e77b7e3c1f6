"""CSRF (``lanner.accounts.csrf``): a write with the session cookie needs the page's token, in a header or a form
field; API keys never do; API responses set no cookie."""

from __future__ import annotations

from lanner.accounts.csrf import CSRF_COOKIE
from lanner.accounts.sessions import SESSION_COOKIE
from tests.web.pages import PASSWORD, sign_in, token_of


def _refused(response) -> None:
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "csrf_failed" and "reload the page" in response.json()["error"]


def test_a_cookie_write_without_the_token_is_refused_and_changes_nothing(client, alice):
    sign_in(client)
    _refused(client.post("/api/api-keys", json={"name": "forged"}))
    _refused(client.post("/account/keys", data={"name": "forged"}))
    _refused(client.post("/logout"))
    keys = client.get("/api/api-keys", headers=alice.headers).json()["keys"]
    assert [k["name"] for k in keys] == ["default"]
    assert client.get("/").status_code == 200  # still signed in


def test_the_token_in_a_header_or_a_form_field_is_accepted(client, alice):
    token = sign_in(client)
    assert client.post("/api/api-keys", json={"name": "by-header"}, headers={"X-CSRFToken": token}).status_code == 201
    assert client.post("/account/keys", data={"name": "by-form", "csrf_token": token}).status_code == 201
    names = [k["name"] for k in client.get("/api/api-keys", headers=alice.headers).json()["keys"]]
    assert names == ["default", "by-header", "by-form"]  # the form's fields reached the page after the check


def test_a_wrong_or_foreign_token_is_refused(client, alice, make_account):
    sign_in(client)
    _refused(client.post("/api/api-keys", json={"name": "x"}, headers={"X-CSRFToken": "not-a-token"}))
    with client.__class__(client.app) as other_browser:  # a valid token, of another browser
        other = token_of(other_browser.get("/login").text)
    _refused(client.post("/api/api-keys", json={"name": "x"}, headers={"X-CSRFToken": other}))
    client.cookies.delete(CSRF_COOKIE)
    _refused(client.post("/api/api-keys", json={"name": "x"}, headers={"X-CSRFToken": other}))


def test_api_key_clients_are_unaffected_even_with_a_session_cookie(client, alice, sdk):
    sign_in(client)  # the client now also carries a session cookie
    created = client.post("/api/api-keys", json={"name": "ci"}, headers=alice.headers)
    assert created.status_code == 201
    assert client.delete(f"/api/api-keys/{created.json()['keyId']}", headers=alice.headers).status_code == 200
    assert SESSION_COOKIE in client.cookies  # the official SDK, with its key, through this same client
    assert sdk(alice).projects.create(project="from-sdk", name="From SDK")


def test_a_write_without_cookie_or_key_is_the_apis_own_401(client, alice):
    assert client.post("/api/api-keys", json={"name": "x"}).status_code == 401


def test_the_sign_in_form_always_needs_the_token_and_the_api_sign_in_never(client, alice):
    _refused(client.post("/login", data={"username": "alice", "password": PASSWORD}))
    sign_in(client)
    client.cookies.delete(CSRF_COOKIE)  # a script with a (stale) session cookie signs in through the API
    assert client.post("/api/auth/login", json={"username": "alice", "password": PASSWORD}).status_code == 200


def test_only_pages_set_the_token_cookie_and_keep_it(client, alice):
    assert CSRF_COOKIE not in client.get("/api/health").headers.get("set-cookie", "")
    assert CSRF_COOKIE not in client.get("/api/account/summary", headers=alice.headers).headers.get("set-cookie", "")
    first = client.get("/login")
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{CSRF_COOKIE}=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    again = client.get("/login")
    assert "set-cookie" not in again.headers and token_of(again.text) == token_of(first.text)


def test_the_trainers_webhook_checks_a_cookie_session_too(client, alice):
    """The webhook's fast lane (``lanner.http.direct_route.FastLane``) takes key holders without cookies only: a
    browser's session write to it still needs the page's token."""
    token = sign_in(client)
    event = {"event": "training_started", "project": "alice/p", "name": "forged", "data": {}}
    _refused(client.post("/api/webhooks/training/metrics", json=event))
    response = client.post("/api/webhooks/training/metrics", json=event, headers={"X-CSRFToken": token})
    assert response.status_code == 200, response.text
