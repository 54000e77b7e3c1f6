"""The train dialog's chart as the server prepares it: the time unit follows the data's range, ticks are round and
distinct with their unit on every label, and the legend carries values."""

from __future__ import annotations

import pytest

from lanner.web.train_chart import chart, nice_ticks, tick_labels, time_unit


def row(gpu: str, seconds: float, cents: float, *, runnable: bool = True, pareto: bool = False) -> dict:
    return {"gpuType": gpu, "displayName": gpu.upper(), "totalSeconds": {"value": seconds},
            "costCents": {"value": cents}, "runnable": runnable, "pareto": pareto}


@pytest.mark.parametrize("longest, unit", [(45, "s"), (119, "s"), (150, "min"), (7000, "min"), (9000, "h")])
def test_the_time_unit_follows_the_longest_run(longest, unit):
    assert time_unit(longest)[0] == unit


@pytest.mark.parametrize("high", [0.02, 0.045, 1.3, 2.7, 7.7, 9.9, 42, 1000])
def test_ticks_are_round_distinct_and_reach_the_highest_value(high):
    ticks = nice_ticks(high)
    assert ticks[0] == 0 and ticks[-1] >= high and 3 <= len(ticks) <= 7
    labels = tick_labels(ticks, unit="min")
    assert len(set(labels)) == len(labels) and all(label.endswith(" min") for label in labels)
    dollars = tick_labels(ticks, dollars=True)
    assert len(set(dollars)) == len(dollars) and all(label.startswith("$") for label in dollars)


def test_the_newcomers_chart_has_minutes_with_distinct_ticks_and_a_legend_with_values():
    """The issue's case: GPUs at 2.7 min that do not run here, the CPU at 7.7 min that does (not "Total time
    (hours)" with ticks "0 min, 1 min, 1 min")."""
    rows = [row("cpu", 462, 7), row("rtx", 162, 2, runnable=False, pareto=True),
            row("h100", 165, 15, runnable=False)]
    data = chart(rows)
    assert data["unit"] == "min" and data["xLabel"] == "Total time (min)"
    assert data["x"] == [2.7, 2.75, 7.7]  # ascending, in minutes
    assert data["xLabels"] == ["0 min", "2 min", "4 min", "6 min", "8 min"]
    assert data["yLabels"] == ["$0.00", "$0.05", "$0.10", "$0.15"] and data["yLabel"] == "Cost ($)"
    assert data["here"] == [None, None, 0.07] and data["elsewhere"] == [0.02, 0.15, None]
    assert data["front"] == [0.02, None, None]
    legend = {entry["kind"]: entry["value"] for entry in data["legend"]}
    assert legend == {"here": "CPU 7.7 min, $0.07", "elsewhere": "2 GPU types, 2.7 min – 2.8 min, $0.02 – $0.15",
                      "front": "RTX 2.7 min, $0.02"}
    assert data["points"][0] == "RTX: 2.7 min, $0.02 (not available here)"
    seconds = chart([row("cpu", 40, 1), row("gpu", 4, 1)])
    assert seconds["unit"] == "s" and seconds["xLabels"][-1] == "40 s" and len(set(seconds["xLabels"])) == 5
