"""``lanner pools``: the node pools Ray's autoscaler brings up on demand (``LANNER_POOLS``), listed with what
each node-hour costs and earns, and checked against the catalogue and the cluster config before runs rely on
them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lanner.cli.common import err, fail
from lanner.config import get_settings

pools_app = typer.Typer(help="GPU node pools brought up on demand (LANNER_POOLS).", no_args_is_help=True)


@pools_app.command("list")
def pools_list() -> None:
    """Show each pool: GPU type and count per node, host, most nodes, spot, cost and credits per node-hour,
    start and idle timeouts, and the start time runs wait for (measured once nodes have been launched)."""
    # start-up cost: each command imports only its own domain
    from rich.console import Console
    from rich.table import Table

    from lanner.cli.common import command_session
    from lanner.gpus.catalogue import get_catalogue
    from lanner.gpus.pools import PoolsError, load_pools
    from lanner.training.provisioning import typical_start_seconds

    settings = get_settings()
    try:
        pools = load_pools(settings.pools)
    except PoolsError as exc:
        fail(str(exc))
    if not len(pools):
        err.print("no pools: set LANNER_POOLS to a pools file (docs/deploy-gpus.md); runs use the nodes there are")
        return
    catalogue = get_catalogue(settings)
    table = Table("pool", "GPU", "GPUs/node", "vCPU / RAM GiB", "max nodes", "spot", "cost $/node-h",
                  "credits $/node-h", "start timeout", "typical start", "idle timeout")
    with command_session() as (_, session):
        for pool in pools:
            price = catalogue.get(pool.gpu).price_per_hour * pool.gpus_per_node if pool.gpu in catalogue else None
            start, measured = typical_start_seconds(session, pool)
            table.add_row(pool.name, pool.gpu, str(pool.gpus_per_node), f"{pool.vcpus} / {pool.ram_gib:g}",
                          str(pool.max_nodes), "yes" if pool.spot else "no", f"{pool.cost_per_node_hour:.2f}",
                          "-" if price is None else f"{price:.2f}", f"{pool.start_timeout_minutes:g} min",
                          f"{start / 60:.1f} min" + (f" (median of {measured})" if measured else " (declared)"),
                          f"{pool.idle_timeout_minutes:g} min")
    Console().print(table)


@pools_app.command("check")
def pools_check(
        cluster: Annotated[Path | None, typer.Option(
            help="The Ray autoscaler config or KubeRay RayCluster to compare with (default: the pools file's "
                 "'cluster').")] = None) -> None:
    """Validate LANNER_POOLS against the GPU catalogue and the cluster config; exit 1 on any error."""
    # start-up cost: each command imports only its own domain
    from lanner.gpus.catalogue import get_catalogue
    from lanner.gpus.pool_check import check_pools, read_cluster_config
    from lanner.gpus.pools import PoolsError, load_pools

    settings = get_settings()
    if not settings.pools:
        fail("LANNER_POOLS is not set: nothing to check")
    try:
        pools = load_pools(settings.pools)
        path = cluster or pools.cluster
        config = read_cluster_config(path) if path is not None else None
    except PoolsError as exc:
        fail(str(exc))
    problems = check_pools(pools, get_catalogue(settings), config)
    for problem in problems:
        err.print(f"[{'red' if problem.error else 'yellow'}]{problem}[/]", soft_wrap=True)
    errors = sum(problem.error for problem in problems)
    compared = f" and {path.name}" if path is not None else " (no cluster config to compare with)"
    if errors:
        fail(f"{errors} error(s) in {len(pools)} pool(s), checked against the catalogue{compared}")
    typer.echo(f"{len(pools)} pool(s) OK, checked against the catalogue{compared}")
