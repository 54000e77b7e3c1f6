"""The memory model against public reports that never fitted a constant (issue 18).

The cases live in ``validation_cases.json`` next to this file, each with its link and conditions; the readable
table and the errors are in docs/gpu-validation.md. What each kind of case must satisfy:

- ``oom``: the run (or AutoBatch's own probe) ran out of memory at this batch, so it must not be predicted to fit:
  the planning memory exceeds the card, and ``max_batch`` is below the batch;
- ``fits``: the run trained at this batch; conservatism is allowed, but not a prediction below half of it;
- ``autobatch``: replaying AutoBatch at the fraction that release targeted lands within +-25 % of its choice;
- ``probe``: one AutoBatch profile row (forward+backward of a model copy) within +-25 %.

Epoch times: none of the public reports found states dataset size, model, imgsz, batch and GPU together outside
shared/reference, so no time case is tested here (docs/gpu-validation.md says so).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lanner.gpus import memory
from lanner.gpus.memory import GIB
from lanner.gpus.profile import model_profile

CASES = json.loads((Path(__file__).with_name("validation_cases.json")).read_text())["cases"]
TOLERANCE = 0.25


def by_kind(*kinds: str) -> list[Any]:
    out = []
    for case in CASES:
        if case["kind"] not in kinds:
            continue
        marks = []
        if case["model"].endswith("-seg.yaml") and case["kind"] == "probe":
            marks.append(pytest.mark.xfail(strict=True, reason="segmentation's saved activations are measured ~38 % "
                                           "low (YOLOv8l-seg profile, #1659); not fixed on this branch"))
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


def probe_memory(case: dict[str, Any]) -> float:
    """AutoBatch's profile row in the 8.0.x releases: the trainer's model, the probe's copy and its grads (+ the
    fp16 weight cache under AMP) and the activations; no loss (profile_ops backpropagated the summed outputs)."""
    profile = model_profile(case["model"], nc=case["nc"])
    act = memory.activation_bytes_per_image(profile, case["imgsz"])
    return (14 * profile.params + memory.K_ACT * act * memory.AMP_FACTOR * case["batch"]) / GIB


def planning(case: dict[str, Any]) -> tuple[float, int]:
    """(planning device memory at the case's batch, largest batch that fits), with SGD as those trainings used."""
    profile = model_profile(case["model"], nc=case["nc"])
    kwargs = {"imgsz": case["imgsz"], "optimizer": "SGD", "max_objects": case["max_objects"]}
    need = memory.training_memory(profile, batch=case["batch"], planning=True, **kwargs).device_gb
    return need, memory.max_batch(case["vram_gib"], profile, **kwargs)


@pytest.mark.parametrize("case", by_kind("oom"))
def test_no_fit_is_predicted_where_a_report_ran_out_of_memory(case: dict[str, Any]) -> None:
    need, largest = planning(case)
    assert need > case["vram_gib"], (case["id"], need)
    assert largest < case["batch"], (case["id"], largest)


@pytest.mark.parametrize("case", by_kind("fits"))
def test_a_batch_that_trained_is_not_refused_by_more_than_half(case: dict[str, Any]) -> None:
    _, largest = planning(case)
    assert largest >= case["batch"] / 2, (case["id"], largest)


@pytest.mark.parametrize("case", by_kind("autobatch"))
def test_autobatch_replay_within_25_percent_of_its_choice(case: dict[str, Any]) -> None:
    profile = model_profile(case["model"], nc=case["nc"])
    # 8.0.x's probe had no loss envelope (max_num_obj arrived in 8.3.31): max_objects=0 replays that.
    chosen = memory.autobatch_batch(case["vram_gib"], profile, imgsz=case["imgsz"],
                                    fraction=case["autobatch_fraction"], max_objects=0)
    assert chosen == pytest.approx(case["batch"], rel=TOLERANCE), case["id"]


@pytest.mark.parametrize("case", by_kind("probe"))
def test_autobatch_profile_rows_within_25_percent(case: dict[str, Any]) -> None:
    assert probe_memory(case) == pytest.approx(case["memory_gib"], rel=TOLERANCE), case["id"]


def test_the_cases_span_enough_gpus_and_have_links() -> None:
    assert len(CASES) >= 15
    assert len({c["gpu"] for c in CASES}) >= 5
    assert all(c["url"].startswith("https://github.com/ultralytics/") for c in CASES)
    assert not any("shared/reference" in c["url"] for c in CASES)


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "oom" and c["gpu"] in
                                  {"a40", "rtx-4090", "t4"}], ids=lambda c: c["id"])
def test_the_advisor_never_recommends_a_batch_a_report_ran_out_of_memory_at(client: Any, alice: Any,
                                                                            case: dict[str, Any]) -> None:
    body = {"model": case["model"], "imageCount": {"train": 5000, "val": 500}, "gpuTypes": [case["gpu"]],
            "trainArgs": {"epochs": 10, "imgsz": case["imgsz"], "batch": case["batch"], "optimizer": "SGD"}}
    response = client.post("/api/training/estimate", json=body, headers=alice.headers)
    assert response.status_code == 200, response.text
    answer = response.json()
    (estimate,) = answer["estimates"]
    assert estimate["fits"] is False and estimate["maxBatch"] < case["batch"]
    assert all(pick is None or pick.get("gpuType") != case["gpu"] for pick in answer["recommendation"].values())
