"""``lanner estimate``: time, memory, cost and availability on every GPU type, laid out for the terminal's width
(the full table when it fits, compact columns at 80, one block per GPU type below that)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from lanner.accounts.principal import Principal
from lanner.cli.common import act_as, command_session, fail


def _uri_owner(uri: str | None) -> str | None:
    """The owner (a username) of a ul://owner/... URI; None for anything else."""
    return (uri.removeprefix("ul://").split("/")[0] or None) if uri and uri.startswith("ul://") else None


def _duration(text: str) -> float:
    """'90', '90m', '2h', '1.5h' -> minutes."""
    units = {"m": 1.0, "h": 60.0, "d": 1440.0}
    text = text.strip().lower()
    try:
        return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        raise typer.BadParameter(f"not a duration: {text!r} (use 90m, 2h, ...)") from None


def estimate(model: Annotated[str, typer.Option(help="Model YAML, weights, or ul://owner/project/model.")],
             data: Annotated[str | None, typer.Option(help="ul://owner/datasets/slug")] = None,
             train_images: Annotated[int | None, typer.Option(help="Training images (without --data).")] = None,
             val_images: Annotated[int, typer.Option(help="Validation images (without --data).")] = 0,
             epochs: Annotated[int, typer.Option(help="Epochs.")] = 100,
             imgsz: Annotated[int, typer.Option(help="Image size.")] = 640,
             batch: Annotated[int, typer.Option(help="Batch size; -1 = AutoBatch.")] = 16,
             deadline: Annotated[str | None, typer.Option(help="Finish within, e.g. 2h or 90m.")] = None,
             budget: Annotated[float | None, typer.Option(help="Spend at most this many USD.")] = None,
             gpus: Annotated[int, typer.Option(min=1, max=8, help="GPUs of each type on one node (DDP); price, "
                                                                  "time and memory per GPU for that many.")] = 1,
             owner: Annotated[str | None, typer.Option(help="Estimate as this user (tier, private datasets); "
                                                         "default: the owner named in --data or --model, else "
                                                         "no tier limit.")] = None,
             ) -> None:
    """Time, memory, cost and availability on every GPU type, sorted by cost, the recommendation on top."""
    # start-up cost: the advisor's numbers (torch and ultralytics only for a model not profiled before)
    from lanner.errors import NotFound
    from lanner.gpus import profile_cache
    from lanner.gpus.catalogue import get_catalogue
    from lanner.training.estimates import PROFILE_CACHE, estimate_named

    if (data is None) == (train_images is None):
        fail("give either --data ul://owner/datasets/slug or --train-images N")
    # Without --owner the estimate runs as the owner its URIs name, so their private datasets and models are
    # readable and their tier marks which GPU types they may use.
    source = "--owner"
    if owner is None:
        source, owner = next(((option, _uri_owner(uri)) for option, uri in (("--data", data), ("--model", model))
                              if _uri_owner(uri)), (source, None))
    with command_session() as (ctx, session):
        principal = Principal.operator()
        if owner:
            try:
                principal = act_as(session, owner)
            except NotFound:
                given = {"--owner": owner, "--data": data, "--model": model}[source]
                fail(f"{source} {given}: user '{owner}' not found")
        catalogue = get_catalogue(ctx.settings)
        profile_cache.use_file(ctx.settings.resolved_home / PROFILE_CACHE)
        try:
            result = estimate_named(
                session, principal, catalogue, model=model, data=data,
                images=(int(train_images or 0), val_images) if data is None else None,
                train_args={"epochs": epochs, "imgsz": imgsz, "batch": batch},
                deadline_minutes=_duration(deadline) if deadline else None,
                budget_cents=budget * 100 if budget is not None else None, gpu_count=gpus)
        finally:
            profile_cache.use_file(None)  # this command's home only (tests run many in one process)
        levels = _availability(session, ctx.settings, catalogue)
    from lanner.training.capacity import add_availability, recommend_here  # start-up cost: as _availability's

    for item in result["estimates"]:
        add_availability(item, levels.get(item["gpuType"]))
        item["availabilityText"] = item["availabilityText"] if item["gpuType"] in levels else "unknown"
    # As the API and the dialog: picks among the types that run here, by training plus start-up; every type where
    # the executor could not be asked.
    runnable = {gpu for gpu, entry in levels.items() if entry.level is not None} or {
        item["gpuType"] for item in result["estimates"]}
    recommend_here(result, runnable, deadline_minutes=_duration(deadline) if deadline else None,
                   budget_cents=budget * 100 if budget is not None else None)
    show(Console(), result)


def _availability(session: Any, settings: Any, catalogue: Any) -> dict[str, Any]:
    """What ``training.gpu_availability`` says, in words ("free now", "on demand, about 4 min", "queued behind 2
    runs", "not offered"), counting the runs the database knows of; "unknown" where the executor cannot be
    asked."""
    # start-up cost: each command imports only its own domain (the executors bring psutil, Ray's client)
    from lanner.training.capacity import availability
    from lanner.training.executors import make_executor

    try:
        return availability(session, make_executor(settings), catalogue)
    except Exception:  # a Ray cluster that does not answer: the estimate still stands
        return {}


def _span(r: dict, unit: float = 60.0, fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(r['value'] / unit)} ({fmt.format(r['low'] / unit)}-{fmt.format(r['high'] / unit)})"


def _notes(e: dict) -> str:
    return ", ".join(n for n, on in (("loader-bound", e["loaderBound"]), (f"needs {e['minTier']}",
                                                                          not e["allowed"])) if on)


def _memory(e: dict, *, free: bool = True) -> str:
    margin = e["memory"]
    return f"{margin['usedGb']:.1f}/{margin['capacityGb']:.1f}" + (f" ({margin['freePct']:.0f}%)" if free else "")


def wide_table(rows: list[dict]) -> Table:
    table = Table("GPU type", "$/h", "batch", "memory GB", "max batch", "fits", "epoch s", "total min", "cost $",
                  "notes", "available")
    for e in rows:
        table.add_row(e["gpuType"], f"{e['pricePerHour']:.2f}", str(e["batch"]), _memory(e),
                      str(e["memory"]["largestBatch"]), "yes" if e["fits"] else "no",
                      _span(e["epochSeconds"], 1.0, "{:.1f}"), _span(e["totalSeconds"]),
                      _span(e["costCents"], 100.0, "{:.2f}"), _notes(e), e["availabilityText"])
    return table


def compact_table(rows: list[dict]) -> Table:
    """No borders and no ranges of epoch time or cost (the total time's range gives the uncertainty); the batch
    only when it differs between types (AutoBatch), the tier a type needs below the table (``tier_notes``)."""
    batches = len({e["batch"] for e in rows}) > 1
    misfits = not all(e["fits"] for e in rows)  # when every type fits, the column says nothing
    table = Table("GPU type", "$/h", *(["batch"] if batches else []), "mem GB", *(["fits"] if misfits else []),
                  "total min", "cost $", "available", box=None, pad_edge=False, header_style="bold")
    for e in rows:
        table.add_row(e["gpuType"], f"{e['pricePerHour']:.2f}", *([str(e["batch"])] if batches else []),
                      _memory(e, free=False), *(["yes" if e["fits"] else "no"] if misfits else []),
                      _span(e["totalSeconds"]), f"{e['costCents']['value'] / 100:.2f}", e["availabilityText"])
    return table


def tier_notes(rows: list[dict]) -> list[str]:
    tiers: dict[str, list[str]] = {}
    for e in rows:
        if not e["allowed"]:
            tiers.setdefault(e["minTier"], []).append(e["gpuType"])
    return [f"needs the {tier} tier: {', '.join(types)}" for tier, types in tiers.items()]


def blocks(rows: list[dict]) -> list[str]:
    """One block per GPU type, for terminals too narrow for any table."""
    out = []
    for e in rows:
        notes = _notes(e)
        out += [f"[bold]{e['gpuType']}[/bold]  ${e['pricePerHour']:.2f}/h  {e['availabilityText']}",
                f"  batch {e['batch']}, memory {_memory(e)} GB, max batch {e['memory']['largestBatch']}, "
                f"fits: {'yes' if e['fits'] else 'no'}" + (f", {notes}" if notes else ""),
                f"  epoch {_span(e['epochSeconds'], 1.0, '{:.1f}')} s, total {_span(e['totalSeconds'])} min, "
                f"cost ${_span(e['costCents'], 100.0, '{:.2f}')}"]
    return out


def _fits(console: Console, table: Table) -> bool:
    """Whether the table's natural width (measured without the terminal's bound) fits the terminal."""
    unbounded = console.options.update_width(100_000)
    return Measurement.get(console, unbounded, table).maximum <= console.width


def show(console: Console, result: dict) -> None:
    for key in ("cheapest", "fastest", "balanced"):
        pick = result["recommendation"].get(key)
        console.print(f"[bold]{key}[/bold]: {pick['reason'] if pick else '-'}")
    if note := result["recommendation"].get("note"):
        console.print(f"[yellow]{note['reason']}[/yellow]")
    if guidance := result.get("guidance"):
        console.print(f"rule of thumb: {guidance['rule']}" + (f" ({guidance['why']})" if guidance.get("why") else ""))
    rows = sorted(result["estimates"], key=lambda e: (not e["fits"], e["costCents"]["value"]))
    if rows and rows[0]["gpuCount"] > 1:
        count, efficiencies = rows[0]["gpuCount"], sorted({e["scaling"]["efficiency"] for e in rows})
        console.print(f"{count} GPUs of each type: $/h and cost are for all {count}, the batch is split between them "
                      f"(memory per GPU); the time assumes DDP scales at {' or '.join(f'{x:g}' for x in efficiencies)}"
                      f" per GPU (the type's multi_gpu_efficiency), an assumption until measured")
    wide, compact = wide_table(rows), compact_table(rows)
    if _fits(console, wide):
        console.print("memory: the batch's planned peak (with a safety margin) of the card's usable GB (% free), "
                      "and the largest batch that fits")
        console.print(wide)
    elif _fits(console, compact):
        batch = "" if len({e["batch"] for e in rows}) > 1 else f"batch {rows[0]['batch']}; "
        fits = "every GPU type fits its batch; " if all(e["fits"] for e in rows) else ""
        console.print(f"{batch}{fits}mem GB: the batch's planned peak of the card's usable memory; total min: the "
                      "estimate (its range); a wider terminal shows epoch times, cost ranges and the largest batch")
        console.print(compact)
        for line in tier_notes(rows):
            console.print(line)
    else:
        for line in blocks(rows):
            console.print(line)
    accuracy = result["accuracy"]
    console.print(f"estimator accuracy on past runs: {accuracy.get('medianAbsErrorPct')}% median error over "
                  f"{accuracy['runs']} run(s)" if accuracy["runs"] else accuracy.get("note", ""))
