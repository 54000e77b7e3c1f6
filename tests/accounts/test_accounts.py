"""Accounts: API-key auth, the SDK's account endpoints, password login, and the operator CLI."""

from __future__ import annotations

import subprocess
import sys

from tests.sdk_types import assert_sdk_type


def test_missing_and_wrong_keys_get_401_with_json_error(client, alice):
    for headers in ({}, {"Authorization": "Bearer ul_" + "0" * 40}, {"Authorization": "Bearer nonsense"},
                    {"Authorization": "Basic abc"}):
        response = client.get("/api/account/summary", headers=headers)
        assert response.status_code == 401
        assert isinstance(response.json()["error"], str) and response.json()["error"]


def test_account_summary_api_keys_and_profile_match_sdk_types(sdk, alice, app):
    from lanner.billing import service as billing

    with app.state.lanner.db.session() as session:
        billing.top_up(session, user_id=alice.user_id, micros=12_345_678)
    platform = sdk(alice)
    summary = assert_sdk_type(platform.account.summary(), "AccountSummaryResponse")
    assert summary["username"] == "alice"
    assert summary["plan"] == "free"
    assert summary["creditsCents"] == 1234  # $12.345678 shown in whole cents, rounded down
    keys = assert_sdk_type(platform.account.api_keys(), "AccountApiKeysResponse")
    assert len(keys["keys"]) == 1 and alice.key.startswith(keys["keys"][0]["keyPrefix"])
    profile = assert_sdk_type(platform.account.profile(username="alice"), "AccountProfileResponse")
    assert profile["user"]["username"] == "alice"


def test_key_is_stored_as_digest_and_revocation_takes_effect(client, alice, app):
    from sqlalchemy import select

    from lanner.accounts.models import ApiKey

    with app.state.lanner.db.session() as session:
        stored = session.scalars(select(ApiKey.digest)).all()
    assert alice.key not in stored and len(stored[0]) == 64
    created = client.post("/api/api-keys", json={"name": "ci"}, headers=alice.headers)
    assert created.status_code == 201
    new_key = created.json()["key"]
    assert len(new_key) == 43 and new_key.startswith("ul_")
    headers = {"Authorization": f"Bearer {new_key}"}
    assert client.get("/api/account/summary", headers=headers).status_code == 200
    assert client.delete(f"/api/api-keys/{created.json()['keyId']}", headers=alice.headers).status_code == 200
    assert client.get("/api/account/summary", headers=headers).status_code == 401


def test_cannot_revoke_someone_elses_key(client, alice, bob):
    keys = client.get("/api/api-keys", headers=bob.headers).json()["keys"]
    response = client.delete(f"/api/api-keys/{keys[0]['keyId']}", headers=alice.headers)
    assert response.status_code == 404
    assert client.get("/api/account/summary", headers=bob.headers).status_code == 200


def test_password_login_sets_a_session_cookie(client, alice):
    bad = client.post("/api/auth/login", json={"username": "alice", "password": "wrong"})
    assert bad.status_code == 401 and "error" in bad.json()
    good = client.post("/api/auth/login", json={"username": "alice", "password": "correct horse"})
    assert good.status_code == 200
    assert client.get("/api/account/summary").json()["username"] == "alice"
    page = client.get("/")
    assert page.status_code == 200 and "Projects" in page.text


def test_password_is_hashed_with_scrypt(app, alice):
    from lanner.accounts import service

    with app.state.lanner.db.session() as session:
        user = service.get_user_by_username(session, username="alice")
        assert user.password_hash.startswith("scrypt$") and "correct horse" not in user.password_hash


def test_invalid_user_creation_is_refused(client, app):
    import pytest

    from lanner.accounts import service
    from lanner.errors import BadRequest, Conflict

    with app.state.lanner.db.session() as session:
        service.create_user(session, username="carol")
    with app.state.lanner.db.session() as session:
        with pytest.raises(Conflict):
            service.create_user(session, username="carol")
        with pytest.raises(BadRequest):
            service.create_user(session, username="Bad Name!")
        with pytest.raises(BadRequest):
            service.create_user(session, username="dave", tier="platinum")


def _cli(home, *args):
    env = {"LANNER_HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "lanner.cli", *args], capture_output=True, text=True, env=env)


def test_cli_prints_only_the_value_asked_for(tmp_path):
    created = _cli(tmp_path, "users", "create", "erin", "--password", "longpassword", "--tier", "pro",
                   "--credits", "2.50")
    assert created.returncode == 0, created.stderr
    assert created.stdout == "erin\n"
    key = _cli(tmp_path, "keys", "create", "erin")
    assert key.returncode == 0 and len(key.stdout.strip()) == 43 and key.stdout.startswith("ul_")
    credits = _cli(tmp_path, "credits", "add", "erin", "1")
    assert credits.stdout.strip() == "350"
    duplicate = _cli(tmp_path, "users", "create", "erin")
    assert duplicate.returncode == 1 and "already exists" in duplicate.stderr and duplicate.stdout == ""
    missing = _cli(tmp_path, "keys", "create", "nobody")
    assert missing.returncode == 1 and "not found" in missing.stderr
