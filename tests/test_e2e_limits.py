"""Past one machine (issue 30), against real servers: a valid key and a valid session still work from an address
that just sent 60 wrong keys, while guessing stays throttled whatever X-Forwarded-For the guesser writes; rate
limits counted in one Redis hold across server processes within 5 %; while Redis is down each process counts on
its own (never refused for the outage, never unlimited); `serve --workers N` without Redis says limits are per
process."""

from __future__ import annotations

import logging
import subprocess

import httpx
import pytest

from lanner.config import Settings
from lanner.errors import TooManyRequests
from lanner.http.ratelimit import Counters, RateLimits
from tests.redis_server import running_redis
from tests.servers import VENV_BIN, free_port, lanner_cli, lanner_env, start_server, wait_for

pytestmark = pytest.mark.e2e
PASSWORD = "correct horse battery"
WRONG = {"Authorization": "Bearer ul_" + "0" * 40}
PER_PROCESS = "rate limits are per process"


def _assert_throttled(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["error"] and int(response.headers["retry-after"]) >= 1


def test_a_valid_key_and_session_work_from_an_address_that_just_sent_60_wrong_keys(tmp_path):
    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "alice", "--password", PASSWORD)
    key = lanner_cli(home, "keys", "create", "alice")
    server = start_server(home, LANNER_AUTH_FAILURE_LIMIT_PER_IP="10/minute",
                          LANNER_LOGIN_LIMIT_PER_USERNAME_AND_ADDRESS="5/minute")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            summary = "/api/account/summary"
            statuses = [client.get(summary, headers=WRONG | {"X-Forwarded-For": f"198.51.100.{i}"}).status_code
                        for i in range(60)]  # a new spoofed address each time: not believed from this peer
            assert statuses == [401] * 10 + [429] * 50
            _assert_throttled(client.get(summary, headers=WRONG))
            valid = client.get(summary, headers={"Authorization": f"Bearer {key}"})
            assert valid.status_code == 200, valid.text

            for _ in range(5):  # the same address guesses a password too: throttled for that username alone
                assert client.post("/api/auth/login", json={"username": "bob", "password": "x"}).status_code == 401
            _assert_throttled(client.post("/api/auth/login", json={"username": "bob", "password": "x"}))
            signed_in = client.post("/api/auth/login", json={"username": "alice", "password": PASSWORD})
            assert signed_in.status_code == 200, signed_in.text
            _assert_throttled(client.get(summary, headers=WRONG))  # the session is no way around the throttle
            session = client.get(summary)  # the session cookie, no key
            assert session.status_code == 200 and session.json(), session.text
    finally:
        server.stop()


def test_rate_limits_counted_in_redis_hold_across_processes_and_survive_its_outage(tmp_path):
    """Three server processes on one database and one Redis, 200 requests with one key round-robin against a
    limit of 100 (per process, 162-200 were allowed): 100 ± 5 allowed. Per hour rather than the issue's per
    minute, so that a slow machine's 200 requests cannot outlast the window. Then Redis stops: each process
    serves again, counting on its own, and logs why."""
    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    with running_redis(tmp_path / "redis") as redis_server:
        settings = {"LANNER_REDIS_URL": redis_server.url, "LANNER_API_RATE_LIMIT": "100/hour"}
        servers = [start_server(home, serve_args=("--workers", "2"), log_name="server-0.log", **settings)]
        try:
            servers += [start_server(home, log_name=f"server-{i}.log", **settings) for i in (1, 2)]
            clients = [httpx.Client(base_url=s.url, timeout=30, headers={"Authorization": f"Bearer {key}"})
                       for s in servers]
            allowed = [0, 0, 0]
            for i in range(200):
                response = clients[i % 3].get("/api/account/summary", headers={"Connection": "close"})
                if response.status_code == 200:
                    allowed[i % 3] += 1
                else:
                    _assert_throttled(response)
            assert 95 <= sum(allowed) <= 105, allowed
            assert all(allowed), allowed  # every process served some: the count is shared, not one server's
            assert all(PER_PROCESS not in s.log.read_text() for s in servers)  # Redis shares: no warning

            redis_server.stop()
            back = [c.get("/api/account/summary").status_code for c in clients]
            assert back == [200, 200, 200], back  # never refused for the outage: each process counts alone
            for server in servers[1:]:
                wait_for(lambda s=server: "unreachable" in s.log.read_text(), timeout=30,
                         what="the warning that Redis is unreachable")
            statuses = [clients[1].get("/api/account/summary").status_code for _ in range(100)]
            assert statuses.count(200) == 99 and statuses[-1] == 429, statuses  # and never unlimited
        finally:
            for server in servers:
                server.stop()


def test_the_counters_fall_back_to_the_process_and_return_to_redis(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(Counters, "RETRY_SECONDS", 0.0)  # try Redis again on every hit: the test waits for nothing
    with running_redis(tmp_path / "redis") as redis_server:
        settings = Settings(home=tmp_path / "home", redis_url=redis_server.url, api_rate_limit="3/minute")
        first, second = RateLimits(settings), RateLimits(settings)  # two processes' worth
        first.count_request("key:k", "/api/projects", worker=False)
        second.count_request("key:k", "/api/projects", worker=False)
        redis_server.stop()
        with caplog.at_level(logging.WARNING, logger="lanner.http.ratelimit"):
            for _ in range(3):
                first.count_request("key:k", "/api/projects", worker=False)
            with pytest.raises(TooManyRequests):
                first.count_request("key:k", "/api/projects", worker=False)
        assert "unreachable" in caplog.text and "counting in this process" in caplog.text
        assert caplog.text.count("unreachable") == 1  # once per outage, not once per hit
        redis_server.start()  # empty: --save '' kept nothing
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="lanner.http.ratelimit"):
            for _ in range(3):
                second.count_request("key:k", "/api/projects", worker=False)
            with pytest.raises(TooManyRequests):
                first.count_request("key:k", "/api/projects", worker=False)  # back in Redis: second's 3 count
        assert "reachable again" in caplog.text


def test_serve_with_several_workers_and_no_redis_warns_in_one_line(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    log = home / "serve.log"
    process = subprocess.Popen([str(VENV_BIN / "lanner"), "serve", "--port", str(free_port()), "--workers", "2"],
                               env=lanner_env(home), stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        line = wait_for(lambda: next((x for x in log.read_text().splitlines() if PER_PROCESS in x), None),
                        timeout=120, what="the per-process warning")
        assert line.startswith("warning:") and "2 workers" in line and "LANNER_REDIS_URL" in line
    finally:
        process.terminate()
        process.wait(timeout=30)
