"""POST /api/training/estimate refuses what the trainer would refuse, naming the field, and accepts what it takes.

A value the trainer rejects (or a typo such as imgsz=64000) must come back as a client error that names the field,
never as a 500 or as a silent estimate of something nobody meant."""

from __future__ import annotations

from typing import Any

import pytest

BODY = {"model": "yolo11n.yaml", "imageCount": {"train": 200, "val": 50}, "gpuTypes": ["rtx-4090"],
        "trainArgs": {"epochs": 10, "imgsz": 320, "batch": 8}}


def post(client: Any, account: Any, **change: Any) -> Any:
    body = {**BODY, **change}
    if "trainArgs" in change:
        body["trainArgs"] = {**BODY["trainArgs"], **change["trainArgs"]}
    return client.post("/api/training/estimate", json=body, headers=account.headers)


# build_optimizer's names, compared without case as the trainer does (it lowercases both sides).
@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "Adamax", "AdamW", "NAdam", "RAdam", "RMSprop", "RMSProp",
                                       "MuSGD", "auto", "adamw", "sgd"])
def test_every_optimizer_the_trainer_builds_is_accepted(client: Any, alice: Any, optimizer: str) -> None:
    response = post(client, alice, trainArgs={"optimizer": optimizer})
    assert response.status_code == 200, response.text


def test_an_unknown_optimizer_is_refused_with_the_choices(client: Any, alice: Any) -> None:
    response = post(client, alice, trainArgs={"optimizer": "foo"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith("trainArgs.optimizer") and "foo" in error and "adamw" in error


@pytest.mark.parametrize("args, field", [
    ({"imgsz": 8193}, "trainArgs.imgsz"),
    ({"imgsz": 64_000}, "trainArgs.imgsz"),
    ({"imgsz": "big"}, "trainArgs.imgsz"),
    ({"imgsz": 640.5}, "trainArgs.imgsz"),  # the trainer's check_imgsz refuses it: no silent truncation
    ({"epochs": 2.5}, "trainArgs.epochs"),
    ({"imgsz": [640, 480]}, "trainArgs.imgsz"),
    ({"imgsz": False}, "trainArgs.imgsz"),
    ({"epochs": 100_001}, "trainArgs.epochs"),
    ({"epochs": 0}, "trainArgs.epochs"),
    ({"batch": 0}, "trainArgs.batch"),
    ({"batch": -2}, "trainArgs.batch"),
    ({"batch": 1.5}, "trainArgs.batch"),
    ({"batch": "many"}, "trainArgs.batch"),
    ({"fraction": 0}, "trainArgs.fraction"),
    ({"workers": -1}, "trainArgs.workers"),
])
def test_out_of_range_arguments_name_the_field(client: Any, alice: Any, args: dict[str, Any], field: str) -> None:
    response = post(client, alice, trainArgs=args)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(field)


@pytest.mark.parametrize("args, batch", [({"batch": -1}, None), ({"batch": 0.5}, None), ({"batch": 1}, 1),
                                         ({"batch": "32"}, 32), ({"imgsz": 8192, "batch": 1}, 1)])
def test_batch_forms_the_trainer_takes_are_accepted(client: Any, alice: Any, args: dict[str, Any],
                                                    batch: int | None) -> None:
    """-1 is AutoBatch, 0<x<1 the memory fraction AutoBatch aims at, else a positive whole number."""
    response = post(client, alice, trainArgs=args)
    assert response.status_code == 200, response.text
    [estimate] = response.json()["estimates"]
    assert estimate["batch"] >= 1 and (batch is None or estimate["batch"] == batch)


def test_an_empty_gpu_type_list_is_refused_not_read_as_all(client: Any, alice: Any) -> None:
    response = post(client, alice, gpuTypes=[])
    assert response.status_code == 400 and response.json()["error"].startswith("gpuTypes")


def test_an_unknown_model_uri_names_the_model_field(client: Any, alice: Any) -> None:
    response = post(client, alice, model="ul://alice/nope/m")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error.startswith("model: 'ul://alice/nope/m' not found") and "alice/nope" in error
    response = post(client, alice, model="ul://alice/nope")
    assert response.status_code == 400 and response.json()["error"].startswith("model")


@pytest.mark.parametrize("model", ["*", "*.yaml", "bytetrack"])
def test_a_name_that_finds_a_yaml_that_is_not_a_model_is_a_400(client: Any, alice: Any, model: str) -> None:
    """Found by benchmarks/fuzz_api.py: Ultralytics resolves a name by globbing its folders, so '*' found a
    dataset or tracker YAML, which has no head, and the profiler answered 500."""
    response = post(client, alice, model=model)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("model")
