"""Authentication hardening (issue 14): rate limits with 429 + Retry-After, password hashing off the event loop
with equal work for unknown users, server-side sessions that logout and a password change end, security
headers, and no way to learn which usernames exist."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from ultralytics_platform import Platform

from lanner.accounts import security
from lanner.accounts import service as accounts_service
from lanner.accounts.models import WebSession
from lanner.accounts.sessions import SESSION_COOKIE
from lanner.app import create_app
from lanner.config import Settings
from lanner.db import utcnow
from tests.conftest import TEST_URL, Account, csrf_headers

PASSWORD = "correct horse"


@pytest.fixture
def limited(settings: Settings) -> Iterator[Callable[..., tuple[Any, TestClient]]]:
    """An app whose rate limits are the given ones (the suite's defaults are generous), and a client for it."""
    opened: list[tuple[Any, TestClient]] = []

    def make(**limits: str) -> tuple[Any, TestClient]:
        app = create_app(settings.model_copy(update=limits))
        client = TestClient(app).__enter__()
        opened.append((app, client))
        return app, client

    yield make
    for app, client in opened:
        client.__exit__(None, None, None)
        app.state.lanner.db.dispose()


def _account(app: Any, username: str, password: str | None = PASSWORD, *, run_id: int | None = None) -> Account:
    with app.state.lanner.db.session() as session:
        user = accounts_service.get_user_by_username(session, username=username) or accounts_service.create_user(
            session, username=username, password=password)
        _, key = accounts_service.create_api_key(session, user=user, run_id=run_id)
        return Account(user.username, user.id, key, {"Authorization": f"Bearer {key}"})


def _login(client: TestClient, username: str = "alice", password: str = PASSWORD) -> Any:
    return client.post("/api/auth/login", json={"username": username, "password": password})


def _assert_rate_limited(response: Any) -> None:
    assert response.status_code == 429, response.text
    assert 1 <= int(response.headers["retry-after"]) <= 60
    body = response.json()
    assert body["code"] == "rate_limited" and "retry in" in body["error"]


# --- sign-in and wrong keys ----------------------------------------------------------------------------------

def test_wrong_passwords_then_the_right_one_is_still_refused(limited):
    app, client = limited(login_limit_per_username="5/minute")
    _account(app, "alice")
    for _ in range(5):
        assert _login(client, password="wrong guess").status_code == 401
    _assert_rate_limited(_login(client))
    assert client.get("/api/account/summary").status_code == 401  # no session was started


def test_one_accounts_failures_from_an_address_never_refuse_another_accounts_password(limited):
    """An office behind one NAT: bob guessing (or a script of his failing) neither locks alice out nor costs him
    more than his allowance of hashes; alice's own guesses from that address are throttled for her alone."""
    app, client = limited(login_limit_per_username_and_address="5/minute", auth_failure_limit_per_ip="10/minute")
    _account(app, "alice")
    _account(app, "bob")
    for _ in range(5):
        assert _login(client, username="bob", password="guess").status_code == 401
    for _ in range(10):
        _assert_rate_limited(_login(client, username="bob", password="guess"))
    for i in range(20):  # other usernames each their own allowance, whatever the address has failed
        assert _login(client, username=f"nobody{i}", password="guess").status_code == 401
    assert _login(client).status_code == 200
    _assert_rate_limited(_login(client, username="bob"))  # bob's right password waits out his own window
    with TestClient(app, client=("10.0.0.2", 40000)) as elsewhere:  # from another address bob has his allowance
        assert _login(elsewhere, username="bob").status_code == 200


def test_wrong_api_keys_from_one_address_get_429_but_a_valid_key_is_always_served(limited):
    app, client = limited(auth_failure_limit_per_ip="10/minute")
    alice = _account(app, "alice")
    wrong = {"Authorization": "Bearer ul_" + "0" * 40}
    for _ in range(10):
        assert client.get("/api/account/summary", headers=wrong).status_code == 401
    for _ in range(50):
        _assert_rate_limited(client.get("/api/account/summary", headers=wrong))
    assert client.get("/api/account/summary", headers=alice.headers).status_code == 200
    malformed = {"Authorization": "Bearer not-a-key"}
    _assert_rate_limited(client.get("/api/account/summary", headers=malformed))
    with TestClient(app, client=("10.0.0.2", 40000)) as elsewhere:  # another address has its own allowance
        assert elsewhere.get("/api/account/summary", headers=wrong).status_code == 401


# --- request budgets ------------------------------------------------------------------------------------------

def test_each_api_key_has_its_own_request_budget(limited):
    app, client = limited(api_rate_limit="3/minute")
    alice, bob = _account(app, "alice"), _account(app, "bob")
    for _ in range(3):
        assert client.get("/api/account/summary", headers=alice.headers).status_code == 200
    _assert_rate_limited(client.get("/api/account/summary", headers=alice.headers))
    assert client.get("/api/account/summary", headers=bob.headers).status_code == 200
    assert client.get("/api/health").status_code == 200  # no principal, no budget


def test_a_web_session_spends_its_users_budget(limited):
    app, client = limited(api_rate_limit="3/minute")
    _account(app, "alice")
    assert _login(client).status_code == 200
    for _ in range(3):
        assert client.get("/api/account/summary").status_code == 200
    _assert_rate_limited(client.get("/api/account/summary"))


def test_training_workers_are_not_held_to_the_api_rate(limited):
    app, client = limited(api_rate_limit="2/minute", worker_rate_limit="50/minute")
    worker = _account(app, "alice", run_id=12345)  # a run-scoped key, as a worker gets
    for _ in range(6):
        assert client.get("/api/account/summary", headers=worker.headers).status_code == 200
    alice = _account(app, "alice")  # the trainer reporting with the user's own key
    platform = Platform(api_key=alice.key, base_url=TEST_URL, http_client=client, max_retries=0)
    started = platform.training.metrics(event="training_started", project="alice/shapes", name="train",
                                        data={"epochs": 1, "trainArgs": {"model": "yolo11n.yaml"}})
    for chunk in range(5):
        platform.training.metrics(event="console_output", model_id=started["modelId"],
                                  data={"chunkId": chunk, "content": f"line {chunk}\n", "lineCount": 1})
    for _ in range(2):  # the reports spent none of the key's API budget, which is still a limit
        assert client.get("/api/account/summary", headers=alice.headers).status_code == 200
    _assert_rate_limited(client.get("/api/account/summary", headers=alice.headers))


def test_the_worker_budget_is_a_limit_too(limited):
    app, client = limited(worker_rate_limit="3/minute")
    worker = _account(app, "alice", run_id=12345)
    for _ in range(3):
        assert client.get("/api/account/summary", headers=worker.headers).status_code == 200
    _assert_rate_limited(client.get("/api/account/summary", headers=worker.headers))


def test_a_malformed_limit_stops_the_server_at_start(settings):
    with pytest.raises(ValueError):
        create_app(settings.model_copy(update={"api_rate_limit": "lots"}), migrate=False)


def test_inference_paths_spend_their_own_budget(settings):
    from lanner.http.ratelimit import API, INFERENCE, WORKER, RateLimits

    limits = RateLimits(settings.model_copy(update={"inference_rate_limit": "1/minute", "api_rate_limit": ""}))
    assert limits.bucket("/api/models/alice/shapes/train/predict", worker=False) == INFERENCE
    assert limits.bucket("/api/images/d1-k1/predict", worker=False) == INFERENCE
    assert limits.bucket("/api/models/alice/shapes/train", worker=False) == API
    assert limits.bucket("/api/models/alice/shapes/train/predict/x", worker=False) == API
    assert limits.bucket("/api/webhooks/training/metrics", worker=True) == WORKER
    assert limits.bucket("/api/projects/alice", worker=False) == API
    limits.count_request("key:k", "/api/images/x/predict", worker=False)
    with pytest.raises(Exception) as refused:
        limits.count_request("key:k", "/api/models/a/b/c/predict", worker=False)
    assert refused.value.status_code == 429 and refused.value.headers["Retry-After"]
    for _ in range(5):
        limits.count_request("key:k", "/api/projects/alice", worker=False)  # "" turns the API limit off
    with pytest.raises(ValueError):
        RateLimits(settings.model_copy(update={"inference_paths": "(unclosed"}))


def test_memory_rate_limits_start_no_thread_per_hit_and_still_expire(settings, monkeypatch):
    """``memory://`` counts without the library's timer thread per hit; expired entries never count, and the
    first hit a second after the last sweep drops them."""
    import limits.storage.memory as memory

    from lanner.http.ratelimit import InlineExpiryMemoryStorage, RateLimits

    assert isinstance(RateLimits(settings).counters.storage, InlineExpiryMemoryStorage)
    storage = InlineExpiryMemoryStorage()

    def no_timer(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a rate-limit hit started a timer thread")

    monkeypatch.setattr(memory.threading, "Timer", no_timer)
    assert storage.acquire_entry("k", 2, 60) and storage.acquire_entry("k", 2, 60)
    assert not storage.acquire_entry("k", 2, 60)  # the window is full
    for entry in storage.events["k"]:  # a minute passes
        entry.atime -= 61
        entry.expiry -= 61
    assert storage.acquire_entry("k", 2, 60)  # expired entries no longer count, swept or not
    assert len(storage.events["k"]) == 3
    storage._next_sweep = 0.0  # the last sweep is a second old
    assert storage.acquire_entry("other", 2, 60)
    assert len(storage.events["k"]) == 1  # swept by that hit, on its own thread


# --- password hashing -----------------------------------------------------------------------------------------

def test_every_sign_in_hashes_once_in_the_hashing_pool_known_user_or_not(client, app, monkeypatch):
    """An unknown user (or one without a password) costs the same scrypt work as a wrong password, so response
    time does not tell which usernames exist; and the hash runs in its own pool, not on the event loop."""
    _account(app, "alice")
    _account(app, "nopass", password=None)
    calls: list[str] = []
    real = security._scrypt

    def counting(*args: Any) -> bytes:
        calls.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(security, "_scrypt", counting)
    for username, password in (("alice", "wrong guess"), ("nobody", "wrong guess"), ("nopass", "x" * 8)):
        calls.clear()
        assert _login(client, username, password).status_code == 401
        assert len(calls) == 1 and calls[0].startswith("lanner-scrypt"), (username, calls)
    calls.clear()
    assert _login(client).status_code == 200 and len(calls) == 1


# --- sessions -------------------------------------------------------------------------------------------------

def test_logout_ends_the_session_for_every_copy_of_the_cookie(client, app):
    _account(app, "alice")
    assert _login(client).status_code == 200
    cookie = client.cookies[SESSION_COOKIE]
    with app.state.lanner.db.session() as session:
        digests = session.scalars(select(WebSession.digest)).all()
    assert len(digests) == 1 and cookie not in digests[0]  # only the token's digest is stored
    assert client.post("/api/auth/logout").status_code == 403  # a write with the session cookie needs the token
    assert client.post("/api/auth/logout", headers=csrf_headers(client)).status_code == 200
    with TestClient(app, cookies={SESSION_COOKIE: cookie}) as stolen:
        assert stolen.get("/api/account/summary").status_code == 401
        page = stolen.get("/", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/login"


def test_a_password_change_ends_the_users_other_sessions(client, app):
    alice = _account(app, "alice")
    with TestClient(app) as other_browser:
        assert _login(other_browser).status_code == 200
        assert _login(client).status_code == 200
        token = csrf_headers(client)
        wrong = client.post("/api/auth/password", json={"currentPassword": "nope", "newPassword": "new password"},
                            headers=token)
        assert wrong.status_code == 403 and wrong.json()["code"] == "forbidden"
        short = client.post("/api/auth/password", json={"currentPassword": PASSWORD, "newPassword": "short"},
                            headers=token)
        assert short.status_code == 400
        changed = client.post("/api/auth/password", json={"currentPassword": PASSWORD, "newPassword": "new password"},
                              headers=token)
        assert changed.status_code == 200, changed.text
        assert other_browser.get("/api/account/summary").status_code == 401
    assert client.get("/api/account/summary").status_code == 200  # this browser got a fresh session
    assert client.get("/api/account/summary", headers=alice.headers).status_code == 200  # keys unaffected
    with TestClient(app) as fresh:
        assert _login(fresh).status_code == 401
        assert _login(fresh, password="new password").status_code == 200


def test_an_expired_session_is_refused_and_deleted(client, app):
    _account(app, "alice")
    assert _login(client).status_code == 200
    with app.state.lanner.db.session() as session:
        session.execute(update(WebSession).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert client.get("/api/account/summary").status_code == 401
    page = client.get("/", follow_redirects=False)
    assert page.status_code == 303
    with app.state.lanner.db.session() as session:
        assert session.scalars(select(WebSession)).all() == []  # the page's visit deleted it
    assert _login(client).status_code == 200
    with app.state.lanner.db.session() as session:
        session.execute(update(WebSession).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert app.state.maintenance.run_once().expired_sessions == 1  # or maintenance does


def test_the_cookie_is_a_random_token_http_only_lax_and_secure_over_https(limited, settings):
    app, client = limited(public_url="https://lanner.example")
    alice = _account(app, "alice")
    cookie = _login(client).headers["set-cookie"]
    assert alice.user_id not in cookie  # not a signed user id: a token that only names a row
    lowered = cookie.lower()
    assert "httponly" in lowered and "samesite=lax" in lowered and "secure" in lowered


def test_cli_set_password_reads_stdin_and_signs_the_user_out(tmp_path):
    env = {"LANNER_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lanner.cli", *args], capture_output=True, text=True, env=env,
                              input=stdin)

    assert cli("users", "create", "erin", "--password", "first password").returncode == 0
    app = create_app(Settings(home=tmp_path, secret_key=None), migrate=False)
    with TestClient(app) as browser:
        assert _login(browser, "erin", "first password").status_code == 200
        short = cli("users", "set-password", "erin", stdin="short\n")
        assert short.returncode == 1 and "at least 8" in short.stderr
        done = cli("users", "set-password", "erin", stdin="second password\n")
        assert done.returncode == 0 and done.stdout == "", done.stderr
        assert browser.get("/api/account/summary").status_code == 401
        assert _login(browser, "erin", "first password").status_code == 401
        assert _login(browser, "erin", "second password").status_code == 200
        missing = cli("users", "set-password", "nobody", stdin="long enough\n")
        assert missing.returncode == 1 and "not found" in missing.stderr
    app.state.lanner.db.dispose()


# --- headers --------------------------------------------------------------------------------------------------

def test_pages_cannot_be_framed_and_every_response_has_the_basic_headers(client, alice):
    page = client.get("/login")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert "<script>" not in page.text and "<style>" not in page.text  # nothing inline for the CSP to block
    for response in (page, client.get("/api/account/summary", headers=alice.headers), client.get("/api/health"),
                     client.get("/api/account/summary")):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"
    script = client.get("/static/lanner.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "X-CSRFToken" in script.text
    assert client.get("/static/lanner.css").status_code == 200
    docs = client.get("/docs")
    assert "frame-ancestors 'none'" in docs.headers["content-security-policy"]
    assert "default-src 'self'" in docs.headers["content-security-policy"]  # Swagger UI vendored: tests/web


# --- which usernames exist ------------------------------------------------------------------------------------

def test_profiles_do_not_tell_which_usernames_exist(client, alice, bob, sdk):
    nobody = client.get("/api/users", params={"username": "nobody"}, headers=alice.headers)
    quiet = client.get("/api/users", params={"username": "bob"}, headers=alice.headers)
    assert nobody.status_code == quiet.status_code == 404
    assert nobody.json()["code"] == quiet.json()["code"] == "not_found"
    assert sdk(alice).account.profile(username="alice")["user"]["username"] == "alice"  # yourself: always
    assert client.get("/api/users", headers=bob.headers).json()["user"]["username"] == "bob"
    created = client.post("/api/datasets", json={"name": "shapes", "visibility": "public"}, headers=bob.headers)
    assert created.status_code == 201, created.text
    public = client.get("/api/users", params={"username": "bob"}, headers=alice.headers)
    assert public.status_code == 200 and public.json()["user"]["username"] == "bob"


def test_listing_an_unknown_owner_looks_like_an_owner_with_nothing_public(client, alice, bob):
    assert client.post("/api/datasets", json={"name": "secret"}, headers=bob.headers).status_code == 201
    assert client.post("/api/projects", json={"name": "secret"}, headers=bob.headers).status_code in (200, 201)
    for kind in ("datasets", "projects"):
        unknown = client.get(f"/api/{kind}/nobody", headers=alice.headers)
        known = client.get(f"/api/{kind}/bob", headers=alice.headers)
        assert unknown.status_code == known.status_code == 200, (kind, unknown.text)
        assert unknown.json() == known.json()
