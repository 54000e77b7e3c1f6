"""``lanner pools list`` and ``lanner pools check`` on the three set-ups docs/deploy-gpus.md gives (AWS, GCP and
KubeRay, each a cluster config, a pools file and catalogue prices, read out of the guide itself so the guide
cannot drift from what the check accepts), then on each mistake the check exists for; and a pools file the
server refuses to start with, naming the pool and the field."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lanner.gpus.pools import PoolsError, parse_pools
from tests.gpus.test_cli import lanner_cli  # noqa: F401 (the fixture)

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "deploy-gpus.md"
TARGETS = {"AWS": ("ray-cluster.yaml (AWS)", "pools.yaml (AWS)", 0),
           "GCP": ("ray-cluster.yaml (GCP)", "pools.yaml (GCP)", 1),
           "KubeRay": ("lanner-ray.yaml", "pools.yaml (KubeRay on GKE)", 2)}


def guide_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)


def setup(tmp_path: Path, target: str) -> tuple[Path, Path, Path]:
    """The target's three files from the guide, written where the pools file's ``cluster:`` finds the config."""
    cluster_title, pools_title, price_index = TARGETS[target]
    blocks = guide_blocks()
    cluster = next(b for b in blocks if b.splitlines()[0].startswith(f"# {cluster_title}"))
    pools = next(b for b in blocks if b.splitlines()[0] == f"# /etc/lanner/{pools_title}")
    prices = [b for b in blocks if b.splitlines()[0].startswith("# /etc/lanner/gpus.yaml")][price_index]
    name = re.search(r"^cluster: (\S+)", pools, flags=re.M)
    assert name, pools
    paths = (tmp_path / name.group(1), tmp_path / "pools.yaml", tmp_path / "gpus.yaml")
    for path, text in zip(paths, (cluster, pools, prices), strict=True):
        path.write_text(text, encoding="utf-8")
    return paths


@pytest.fixture
def use(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def apply(pools: Path, prices: Path) -> None:
        from lanner.config import get_settings

        monkeypatch.setenv("LANNER_POOLS", str(pools))
        monkeypatch.setenv("LANNER_GPU_CATALOGUE", str(prices))
        get_settings.cache_clear()
    return apply


@pytest.mark.parametrize("target", list(TARGETS))
def test_the_guides_set_ups_pass_the_check(lanner_cli: Callable[..., Any], use: Any, tmp_path: Path,  # noqa: F811
                                           target: str) -> None:
    cluster, pools, prices = setup(tmp_path, target)
    use(pools, prices)
    checked = lanner_cli("pools", "check")
    assert checked.exit_code == 0, checked.output
    assert checked.output.strip().endswith(f"3 pool(s) OK, checked against the catalogue and {cluster.name}")
    listed = lanner_cli("pools", "list")
    assert listed.exit_code == 0, listed.output
    first = parse_pools(__import__("yaml").safe_load(pools.read_text())).pools[0]
    row = next(line for line in listed.output.splitlines() if first.name in line)
    assert first.gpu in row and f"{first.cost_per_node_hour:.2f}" in row and "(declared)" in row


@pytest.mark.parametrize(("change", "words"), [
    (lambda c, p: (c.replace('"lanner-gpu:h100-sxm": 8', '"lanner-gpu:H100": 8'), p),
     "does not advertise the resource 'lanner-gpu:h100-sxm': the autoscaler would never launch it"),
    (lambda c, p: (c.replace('"lanner-gpu:h100-sxm": 8', '"lanner-gpu:h100-sxm": 4'), p),
     "advertises 4 × 'lanner-gpu:h100-sxm' but the pool says gpus_per_node: 8"),
    (lambda c, p: (c, p.replace("max_nodes: 2", "max_nodes: 3", 1)),
     "may grow to 2 nodes but the pool says max_nodes: 3"),
    (lambda c, p: (c, p.replace("gpu: h100-sxm", "gpu: h100-sxx", 1)), "unknown GPU type 'h100-sxx'"),
    (lambda c, p: (c, p.replace("name: h100", "name: h100-big", 1)), "no node type or worker group 'h100-big'"),
    (lambda c, p: (c, re.sub(r"cost_per_node_hour: [0-9.]+", "cost_per_node_hour: 99.00", p, count=1)),
     "price below cost: a node-hour costs $99.00 and earns $72.00 in credits (8 × $9.00 per h100-sxm hour)"),
])
def test_each_mistake_is_an_error_naming_the_pool(lanner_cli: Callable[..., Any], use: Any,  # noqa: F811
                                                  tmp_path: Path, change: Any, words: str) -> None:
    cluster, pools, prices = setup(tmp_path, "AWS")
    changed = change(cluster.read_text(), pools.read_text())
    cluster.write_text(changed[0])
    pools.write_text(changed[1])
    use(pools, prices)
    checked = lanner_cli("pools", "check")
    assert checked.exit_code == 1, checked.output
    flat = " ".join(checked.output.split())
    assert "error: h100" in flat and words in flat, flat
    assert re.search(r"[12] error\(s\) in 3 pool\(s\), checked against the catalogue and ray-cluster.yaml", flat)


def test_an_idle_timeout_the_cluster_does_not_have_is_a_warning(lanner_cli: Callable[..., Any], use: Any,  # noqa: F811
                                                                tmp_path: Path) -> None:
    cluster, pools, prices = setup(tmp_path, "KubeRay")
    pools.write_text(pools.read_text().replace("idle_timeout_minutes: 5", "idle_timeout_minutes: 9", 1))
    use(pools, prices)
    checked = lanner_cli("pools", "check")
    flat = " ".join(checked.output.split())
    assert checked.exit_code == 0 and "warning:" in flat and "releases idle nodes after 5 min" in flat, flat


@pytest.mark.parametrize(("pools", "words"), [
    ({"pools": [{"name": "h100", "gpu": "h100-sxm", "max_nodes": 1}]}, "pools[0]: 'cost_per_node_hour' is required"),
    ({"pools": [{"name": "h100", "gpu": "h100-sxm", "max_nodes": 1, "cost_per_node_hour": 1, "gpus": 8}]},
     "pools[0]: unknown field(s) gpus"),
    ({"pools": [{"name": "a", "gpu": "l4", "max_nodes": 1, "cost_per_node_hour": 1},
                {"name": "b", "gpu": "l4", "max_nodes": 1, "cost_per_node_hour": 1}]},
     "two pools have the GPU type (a run names a type: one pool per type) 'l4'"),
    ({"pools": [{"name": "a", "gpu": "l4", "max_nodes": 0, "cost_per_node_hour": 1}]}, "max_nodes: expected 1 or more"),
    ({"pools": [{"name": "a", "gpu": "l4", "max_nodes": 1.5, "cost_per_node_hour": 1}]}, "expected a whole number"),
    ({"pools": [{"name": "a", "gpu": "l4", "max_nodes": 1, "cost_per_node_hour": 1, "spot": "yes"}]},
     "spot: expected true or false"),
    ({"pool": []}, "expected a mapping with a 'pools' list"),
])
def test_a_bad_pools_file_is_refused_naming_the_field(pools: Any, words: str) -> None:
    with pytest.raises(PoolsError, match=re.escape(words)):
        parse_pools(pools)


def test_the_server_does_not_start_with_a_bad_pools_file(tmp_path: Path, settings: Any) -> None:
    from lanner.app import create_app

    bad = tmp_path / "pools.yaml"
    bad.write_text("pools:\n  - name: h100\n    gpu: h100-sxm\n    max_nodes: 1\n")
    with pytest.raises(PoolsError, match="'cost_per_node_hour' is required"):
        create_app(settings.model_copy(update={"pools": str(bad)}), migrate=False)
