"""The operator's GPU pools page in a real browser, on a real ``lanner serve`` with the Ray executor, a real Ray
head (one H100, so one node of the ``h100`` pool is up) and a pools file of two pools: an admin made with
``lanner users create --admin`` follows the GPUs page's link, sees both pools with their prices per node-hour,
nodes up, runs and typical starts, and 20 days of cost against credits drawn as a chart (uPlot, vendored: no
request to another host, no browser error; see ``conftest``). The history is written as the supervisor and the
ledger write it: ``pool_usage.sample`` every two minutes of the hours each pool was up, charges and refunds of
runs on the pools' GPU types (``tests/ledger.py``), measured node starts (``provisioning.record_wait``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from lanner.db import utcnow
from lanner.gpus.pools import parse_pools
from lanner.training import pool_usage
from lanner.training.executors import Capacity
from lanner.training.models import Run
from lanner.training.provisioning import record_wait
from lanner.training.state import RunStatus, try_transition
from tests.ledger import DOLLAR, make_run, spend_on
from tests.ray_cluster import ray_head_for_module  # noqa: F401  (the fixture)
from tests.servers import start_server
from tests.web.conftest import User, WebServer, screenshot, signed_in
from tests.web.pages import PASSWORD

pytestmark = pytest.mark.browser

POOLS = {"pools": [
    {"name": "h100", "gpu": "h100-sxm", "gpus_per_node": 1, "vcpus": 26, "ram_gib": 225, "max_nodes": 4,
     "cost_per_node_hour": 2.49, "start_timeout_minutes": 15, "typical_start_minutes": 6, "idle_timeout_minutes": 10},
    {"name": "l4-spot", "gpu": "l4", "gpus_per_node": 1, "vcpus": 8, "ram_gib": 32, "max_nodes": 8, "spot": True,
     "cost_per_node_hour": 0.28, "start_timeout_minutes": 10, "typical_start_minutes": 3, "idle_timeout_minutes": 5},
]}
DAYS = 20  # of history, today included
STEP = timedelta(seconds=120)  # the sampler's cap: one sample adds at most this much


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory, ray_head_for_module: str  # noqa: F811
               ) -> Iterator[WebServer]:
    """The server on the Ray head with the two pools; no supervisor passes (the test writes what they would)."""
    home = tmp_path_factory.mktemp("operator-server")
    (home / "pools.json").write_text(json.dumps(POOLS))
    web = WebServer(start_server(home, LANNER_EXECUTOR="ray", LANNER_RAY_ADDRESS=ray_head_for_module,
                                 LANNER_POOLS=str(home / "pools.json"), LANNER_SUPERVISOR_INTERVAL_SECONDS="0"))
    yield web
    web.stop()


def hours_up(days_ago: int) -> tuple[float, float]:
    """(h100 node-hours, l4-spot node-hours at 2 nodes) of a day: a working-day pattern, nothing on weekends."""
    if days_ago % 7 in (5, 6):
        return 0.0, 0.0
    return 3 + (days_ago * 5) % 4, 1 + (days_ago * 3) % 3


def write_history(web: WebServer, user_id: str) -> None:
    pools = parse_pools(POOLS)
    now = utcnow()
    with web.db.session() as session:
        for days_ago in range(DAYS - 1, -1, -1):
            h100, l4 = hours_up(days_ago)
            midnight = datetime.combine((now - timedelta(days=days_ago)).date(), datetime.min.time(), UTC)
            start = now - timedelta(hours=max(h100, l4) + 0.5) if days_ago == 0 else midnight + timedelta(hours=9)
            pool_usage.sample(session, pools, {}, start)  # the day's first sample: nothing was up before it
            moment = start
            while moment < start + timedelta(hours=max(h100, l4)):
                moment += STEP
                up = moment - start
                pool_usage.sample(session, pools, {
                    "h100-sxm": Capacity(total=1 if up <= timedelta(hours=h100) else 0, free=0),
                    "l4": Capacity(total=2 if up <= timedelta(hours=l4) else 0, free=0)}, moment)
    for days_ago in range(DAYS - 1, -1, -1):
        h100, l4 = hours_up(days_ago)
        at = now - timedelta(days=days_ago, hours=1)
        busy = 0.55 if days_ago in (2, 9) else 0.9  # two slow days: runs paid less than the nodes cost
        for gpu, hours, price in (("h100-sxm", h100, 3.29), ("l4", 2 * l4, 0.39)):
            if hours:
                run_id, model_id = make_run(web.db, user_id, project="detector", model=f"{gpu}-{days_ago}", gpu=gpu)
                charge = int(hours * busy * price * DOLLAR)
                spend_on(web.db, user_id, run_id, model_id, hold=charge + DOLLAR, charge=charge, gpu=gpu, at=at)


def runs_now(web: WebServer, user_id: str) -> None:
    """On h100: one run on the node that is up, one waiting for a second node; on l4-spot: one waiting for a node,
    one not launched yet. Three earlier waits for an h100 node measured its start."""
    pools = parse_pools(POOLS)
    states = {"h100-sxm": [RunStatus.STARTING, RunStatus.PROVISIONING], "l4": [RunStatus.PROVISIONING, None]}
    for gpu, wanted in states.items():
        for index, state in enumerate(wanted):
            run_id, _ = make_run(web.db, user_id, project="detector", model=f"now-{gpu}-{index}", gpu=gpu)
            with web.db.session() as session:
                run = session.get(Run, run_id)
                run.executor = "ray"
                if state is not None:
                    assert try_transition(session, run, state, reason="as the supervisor moves it")
    for seconds in (250, 310, 190):
        run_id, _ = make_run(web.db, user_id, project="detector", model=f"waited-{seconds}", gpu="h100-sxm")
        with web.db.session() as session:
            run = session.get(Run, run_id)
            run.provisioning_since = utcnow() - timedelta(seconds=seconds)
            record_wait(session, run, pools.named("h100"), "up", utcnow())


def test_an_admin_sees_what_the_pools_cost_against_what_runs_paid(page: Any, web_server: WebServer) -> None:
    web_server.cli("users", "create", "root", "--password", PASSWORD, "--admin")
    root = User("root", web_server.cli("keys", "create", "root"))
    customer = web_server.user("vera", credits=500)
    write_history(web_server, customer.user_id)
    runs_now(web_server, customer.user_id)
    answer = web_server.api(root, "GET", "/api/operator/pools").json()
    assert [pool["nodesUp"] for pool in answer["pools"]] == [1, 0]  # the Ray head's H100
    assert web_server.api(customer, "GET", "/api/operator/pools").status_code == 403

    signed_in(page, root, "/gpus")
    page.get_by_role("link", name="GPU pools: cost and credits").click()
    page.wait_for_url("**/operator/pools")
    h100 = page.locator('#pool-table tr[data-pool="h100"]')
    expect(h100).to_contain_text("cost $2.49/node-h")
    expect(h100).to_contain_text("credits $3.29/node-h")
    expect(h100).to_contain_text("1 of 4 nodes")
    expect(h100).to_contain_text("1 GPU up, 1 free")
    expect(h100.locator(".pool-runs")).to_have_text(re.compile(r"^\s*1 running\s+1 provisioning · 0 queued\s*$"))
    expect(h100).to_contain_text("idle timeout 10 min")
    expect(h100).to_contain_text("about 4 min (median of 3)")
    spot = page.locator('#pool-table tr[data-pool="l4-spot"]')
    expect(spot).to_contain_text("spot")
    expect(spot.locator(".pool-runs")).to_have_text(re.compile(r"^\s*0 running\s+1 provisioning · 1 queued\s*$"))
    expect(spot).to_contain_text("about 3 min (declared)")
    expect(page.locator("#stat-nodes")).to_have_text("1 of 12")
    total = answer["days"]
    cost = sum(day["costDollars"] for day in total)
    shown = page.locator("#stat-cost").inner_text()
    assert shown.startswith("$") and abs(float(shown[1:].replace(",", "")) - cost) <= 0.01, (shown, cost)
    expect(page.locator("#margin-chart .uplot")).to_be_visible()  # drawn by operator.js
    expect(page.locator("#margin-chart .u-legend")).to_contain_text("Credits charged")
    screenshot(page, "operator-pools")
    page.locator("#margin-chart").scroll_into_view_if_needed()
    over = page.locator("#margin-chart .u-over")
    box = over.bounding_box()
    over.hover(position={"x": box["width"] - 8, "y": box["height"] / 2})  # today's figures in the legend
    screenshot(page, "operator-pools-chart")
