"""The train dialog's cost-against-time chart, prepared on the server: the time unit chosen from the data's range
(s, min or h), ticks that are round and distinct with labels that carry their unit, and a legend with values
(what runs here, what does not, the Pareto front), so ``train.js`` only draws what it is given."""

from __future__ import annotations

import math
from typing import Any

from lanner.gpus.estimator import duration_text

TIME_UNITS = (("s", 1.0, 120.0), ("min", 60.0, 2 * 3600.0), ("h", 3600.0, math.inf))  # name, seconds, below


def time_unit(longest_seconds: float) -> tuple[str, float]:
    """The unit the axis counts in: seconds up to two minutes, minutes up to two hours, then hours."""
    return next((name, size) for name, size, below in TIME_UNITS if longest_seconds < below)


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """0, step, 2 step, ... reaching ``high``: the step is 1, 2, 2.5 or 5 times a power of ten, for about
    ``count`` intervals."""
    high = high if high > 0 and math.isfinite(high) else 1.0
    raw = high / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    intervals = max(1, math.ceil(high / step - 1e-9))
    return [round(i * step, 10) for i in range(intervals + 1)]


def decimals(step: float) -> int:
    """The fewest decimals that tell ticks ``step`` apart (2.5 needs one, 0.25 two)."""
    return next((d for d in range(8) if abs(round(step, d) - step) <= 1e-9 * max(1.0, step)), 8)


def tick_labels(ticks: list[float], *, unit: str = "", dollars: bool = False) -> list[str]:
    places = decimals(ticks[1] - ticks[0]) if len(ticks) > 1 else 0
    if dollars:
        places = max(places, 2) if ticks[-1] < 10 else places
        return [f"${value:,.{places}f}" for value in ticks]
    return [f"{value:.{places}f} {unit}" for value in ticks]


def _figures(row: dict[str, Any]) -> str:
    return f"{duration_text(row['totalSeconds']['value'])}, ${row['costCents']['value'] / 100:.2f}"


def _span(rows: list[dict[str, Any]]) -> str:
    times = [r["totalSeconds"]["value"] for r in rows]
    costs = [r["costCents"]["value"] / 100 for r in rows]
    low, high = duration_text(min(times)), duration_text(max(times))
    return (f"{low}" if low == high else f"{low} – {high}") + (
        f", ${min(costs):.2f}" if min(costs) == max(costs) else f", ${min(costs):.2f} – ${max(costs):.2f}")


def chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """uPlot's columns (x: total time in ``unit``, ascending; the cost in dollars of the types that run here, of
    those that do not, and of the Pareto front, null elsewhere), the axes' ticks and labels, a label per point
    for the hover readout, and the legend's entries with their values."""
    ordered = sorted(rows, key=lambda r: r["totalSeconds"]["value"])
    longest = max((r["totalSeconds"]["value"] for r in ordered), default=1.0)
    unit, size = time_unit(longest)
    costs = [r["costCents"]["value"] / 100 for r in ordered]
    x_ticks = nice_ticks(longest / size)
    y_ticks = nice_ticks(max(costs, default=0.0) or 0.01)
    here = [r for r in ordered if r.get("runnable", True)]
    elsewhere = [r for r in ordered if not r.get("runnable", True)]
    front = [r for r in ordered if r["pareto"]]
    legend = [{"kind": "here", "label": "Runs here",
               "value": "; ".join(f"{r['displayName']} {_figures(r)}" for r in here) or "nothing"}]
    if elsewhere:
        count = f"{len(elsewhere)} GPU type{'s' if len(elsewhere) != 1 else ''}"
        legend.append({"kind": "elsewhere", "label": "Not available here", "value": f"{count}, {_span(elsewhere)}"})
    if front:
        value = f"{front[0]['displayName']} {_figures(front[0])}" if len(front) == 1 else (
            f"{len(front)} GPU types, {_span(front)}")
        legend.append({"kind": "front", "label": "Pareto front (none faster and cheaper)", "value": value})
    return {
        "unit": unit,
        "x": [round(r["totalSeconds"]["value"] / size, 4) for r in ordered],
        "here": [round(c, 4) if r.get("runnable", True) else None for r, c in zip(ordered, costs, strict=True)],
        "elsewhere": [None if r.get("runnable", True) else round(c, 4) for r, c in zip(ordered, costs, strict=True)],
        "front": [round(c, 4) if r["pareto"] else None for r, c in zip(ordered, costs, strict=True)],
        "xTicks": x_ticks, "xLabels": tick_labels(x_ticks, unit=unit), "xLabel": f"Total time ({unit})",
        "yTicks": y_ticks, "yLabels": tick_labels(y_ticks, dollars=True), "yLabel": "Cost ($)",
        "points": [f"{r['displayName']}: {_figures(r)}" + ("" if r.get("runnable", True) else " (not available here)")
                   for r in ordered],
        "legend": legend,
    }
