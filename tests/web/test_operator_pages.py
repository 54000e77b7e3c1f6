"""The operator's GPU pools page in-process: an admin sees each pool (node, prices per node-hour, nodes up, runs,
typical start, idle timeout) and the days' figures with their units, the same the API answers; anyone else gets
the 403 page; without pools the page says how to declare them; the GPUs page links to it for admins only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from lanner.db import utcnow
from lanner.training import pool_usage
from lanner.training.executors import Capacity
from tests.training.test_pools import POOLS, PooledExecutor
from tests.web.pages import PASSWORD, sign_in, soup, text


@pytest.fixture
def pooled(app: Any) -> PooledExecutor:
    executor = PooledExecutor(POOLS)
    executor.nodes["h100-sxm"] = Capacity(total=2, free=2)
    app.state.training.use_executor(executor)
    return executor


def test_an_admin_sees_each_pool_and_the_days_with_their_units(app, client, make_account, pooled):
    make_account("root", password=PASSWORD, admin=True)
    begin = utcnow() - timedelta(hours=2)
    with app.state.lanner.db.session() as session:  # half an hour of one node, sampled as the supervisor does
        for step in range(19):
            pool_usage.sample(session, POOLS, {"h100-sxm": Capacity(total=2, free=0)},
                              begin + timedelta(seconds=100 * step))
    sign_in(client, "root")
    response = client.get("/operator/pools")
    assert response.status_code == 200
    page = soup(response)
    row = page.select_one('#pool-table tr[data-pool="h100"]')
    cells = [text(cell) for cell in row.select("td")]
    assert cells[1:] == ["2 × NVIDIA H100 SXM5 h100-sxm · 8 vCPU · 32 GiB", "1 of 1 node 2 GPUs up, 2 free",
                         "cost $5.00/node-h credits $6.58/node-h", "0 running 0 provisioning · 0 queued",
                         "about 3 min (declared) idle timeout 5 min"]
    assert text(page.select_one("#stat-nodes")) == "1 of 1"
    assert text(page.select_one("#stat-cost")) == "$2.50"  # half a node-hour at $5
    totals = [text(cell) for cell in page.select_one('#pool-totals tr[data-pool="h100"]').select("td")]
    assert totals == ["h100", "0.50 node-h", "$2.50", "$0.00", "-$2.50"]
    days = page.select("#per-day tbody tr")
    assert len(days) == 30 and text(days[0].select("td")[0]) == utcnow().date().isoformat()  # newest first
    assert page.select_one("#margin-chart")["data-chart"].startswith("{")


def test_anyone_else_gets_the_403_page_and_no_link(client, alice, pooled):
    sign_in(client)
    refused = client.get("/operator/pools", headers={"accept": "text/html"})
    assert refused.status_code == 403 and "only a server admin" in refused.text
    assert soup(client.get("/gpus")).select_one("#operator-pools-link") is None


def test_the_gpus_page_links_admins_to_it(client, make_account, fake_executor):
    make_account("root", password=PASSWORD, admin=True)
    sign_in(client, "root")
    assert soup(client.get("/gpus")).select_one("#operator-pools-link")["href"] == "/operator/pools"


def test_without_pools_the_page_says_how_to_declare_them(client, make_account, fake_executor):
    make_account("root", password=PASSWORD, admin=True)
    sign_in(client, "root")
    empty = soup(client.get("/operator/pools")).select_one("#no-pools")
    assert "LANNER_POOLS" in text(empty) and "docs/deploy-gpus.md" in text(empty)
