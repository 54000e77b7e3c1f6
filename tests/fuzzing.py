"""API fuzzing with schemathesis, in-process: shared by ``tests/test_fuzz.py`` (a bounded run in ``make test``)
and ``benchmarks/fuzz_api.py`` (a long run). See docs/fuzzing.md.

Every operation of the OpenAPI document is fuzzed with cases schemathesis generates from it, valid ones
(positive) and invalid ones (negative), sent with the API key of a user who owns one of everything
(``tests/world.py``). Half the cases have their identifiers (path parameters, ``modelId``, ``imageIds``...)
replaced with that user's real ones, so they reach the code behind the lookups. What must hold: no 5xx (what
schemathesis' ``not_a_server_error`` checks) except the deliberate 501 of a hosted-platform feature Lanner does
not offer (``errors.NotImplementedOnSelfHosted``, code ``not_implemented``, README lists them), and every 4xx
is JSON with an ``error`` string.
"""

from __future__ import annotations

import copy
import json
import math
import re
import shlex
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import hypothesis
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

from lanner.app import create_app
from lanner.datasets.models import Dataset
from lanner.deployments.models import Deployment
from lanner.projects.models import ModelRecord, Project
from tests.conftest import TEST_URL
from tests.world import DATASET, DEPLOYMENT, MODEL, PROJECT, Owned, build, make_user, operations, quiet_settings

# What a hostile client sends where a number or a short string is expected: the bounds of 32- and 64-bit
# columns and past them, negatives, non-finite floats (sent as the NaN/Infinity literals Python's JSON parser
# accepts), strings longer than any column and text with a NUL character (PostgreSQL cannot hold it).
INT_EDGES = (2**31, 2**63, 2**64, -1, -(2**63) - 1)
FLOAT_EDGES = (math.nan, math.inf, -math.inf)
EDGES = {int: INT_EDGES + FLOAT_EDGES, float: FLOAT_EDGES + INT_EDGES,
         str: ("x" * 300, "9" * 30, "nul\x00char") + INT_EDGES}

# The webhook's ``data`` is a free object in the document; aimed cases send what the trainer sends per event.
WEBHOOK_DATA: dict[str, dict[str, Any]] = {
    "training_started": {"epochs": 3, "device": "cpu", "trainArgs": {"model": "yolo11n.yaml", "epochs": 3}},
    "training_progress": {"epoch": 1, "step": 3},
    "epoch_end": {"epoch": 1, "metrics": {"train/box_loss": 1.5, "metrics/mAP50(B)": 0.25}, "fitness": 0.2,
                  "best_fitness": 0.2, "system": {"cpu": 12.5}, "modelInfo": {"parameters": 10}},
    "system_metrics": {"cpu": 12.5, "memory": {"used": 1}},
    "console_output": {"chunkId": 1_764_000_000_000, "content": "epoch 1\n", "lineCount": 1},
    "checkpoint_saved": {"modelPath": "checkpoints/x/last.pt"},
    "training_complete": {"results": {"metrics": {"fitness": 0.3}, "bestEpoch": 1, "bestFitness": 0.3},
                          "classNames": ["a"], "plots": []},
    "training_failed": {"error": "CUDA out of memory", "code": "oom"},
}

# Operations not fuzzed, each with the reason. None today: the supervisor and maintenance loops are off
# (``quiet_settings``), so ``training.start`` only queues a run and no trainer process ever starts.
SKIPPED: dict[tuple[str, str], str] = {}


@dataclass
class Failure:
    operation: str
    status: int
    problem: str
    body: str
    request: str

    def __str__(self) -> str:
        return f"{self.operation} -> {self.status} ({self.problem}): {self.body[:300]}\n    {self.request[:800]}"


@dataclass
class Target:
    app: FastAPI
    client: TestClient
    owned: Owned
    schema: Any
    document: dict[str, Any]
    failures: list[Failure] = field(default_factory=list)

    def operations(self) -> list[tuple[str, str]]:
        """Every operation not skipped; deletes last, so the rows they remove serve the others first."""
        ops = [op for op in operations(self.document) if op not in SKIPPED]
        return sorted(ops, key=lambda op: op[0] == "DELETE")


@contextmanager
def target(work: Path | None = None, database_url: str | None = None) -> Iterator[Target]:
    """An app with a fuzzing user who owns one of everything (and has credit), running until the block ends."""
    with tempfile.TemporaryDirectory() as scratch:
        work = work or Path(scratch)
        app = create_app(quiet_settings(work / "home", database_url or f"sqlite:///{work / 'lanner.db'}"))
        with TestClient(app, raise_server_exceptions=False) as client:
            user = make_user(app, "alice", credits_micros=100_000_000)
            owned = build(app, client, user, work)
            document = app.openapi()
            yield Target(app, client, owned, schemathesis.openapi.from_dict(document), document)
        app.state.lanner.db.dispose()


def real_identifiers(t: Target) -> tuple[dict[str, Any], dict[str, Any]]:
    """The owner's identifiers as they are now (a fuzzed PATCH may have renamed a slug): for path and query
    parameters, and for body properties."""
    owned = t.owned
    with t.app.state.lanner.db.session() as session:
        dataset = session.get(Dataset, owned.dataset_id)
        model = session.get(ModelRecord, owned.model_id)
        project = session.get(Project, model.project_id) if model is not None else None
        dataset_slug = dataset.slug if dataset is not None else DATASET
        model_slug = model.slug if model is not None else MODEL
        project_slug = project.slug if project is not None else PROJECT
    owner = owned.user.username
    params = {"owner": owner, "dataset": dataset_slug, "project": project_slug, "model": model_slug,
              "image_id": owned.image_id, "key_id": owned.key_id, "export_id": owned.export_id, "v": owned.version,
              "deployment": _deployment_slug(t),
              "base": owned.version, "head": owned.version, "username": owner, "id": owned.old_dataset_id}
    body = {"modelId": owned.model_id, "runId": owned.run_id, "sessionId": owned.session_id,
            "imageIds": [owned.image_id], "id": owned.old_dataset_id, "assetId": owned.dataset_id,
            "owner": owner, "project": project_slug, "version": owned.version}
    return params, body


def _deployment_slug(t: Target) -> str:
    """The deployment's name as it is now (a fuzzed PATCH may have renamed it, or a DELETE removed it)."""
    with t.app.state.lanner.db.session() as session:
        found = session.get(Deployment, t.owned.deployment_id)
        return found.slug if found is not None and found.deleted_at is None else DEPLOYMENT


def _error_body(response: Any) -> dict[str, Any] | None:
    """The ``{"error": "<string>", "code": ...}`` body, or None when the response is not that shape."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) and isinstance(body.get("error"), str) else None


def fuzz(t: Target, method: str, path: str, *, examples: int, seed: int | None = None) -> int:
    """Send up to ``examples`` generated cases to one operation; failures are appended to ``t.failures``.
    Returns how many cases were sent. ``seed`` None: the same cases every run (derandomized)."""
    operation = t.schema[path][method]
    label = f"{method} {path}"
    params, body_ids = real_identifiers(t)
    integer_params = [p["name"] for p in t.document["paths"][path][method.lower()].get("parameters", [])
                      if p["in"] == "query" and '"integer"' in json.dumps(p.get("schema", {}))]
    headers = t.owned.user.headers
    sent = 0
    strategy = st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                         operation.as_strategy(GenerationMode.NEGATIVE))

    @hypothesis.settings(max_examples=examples, deadline=None, database=None, derandomize=seed is None,
                         suppress_health_check=list(HealthCheck), phases=[hypothesis.Phase.generate])
    @hypothesis.given(case=strategy, real=st.booleans(), data=st.data())
    def run(case: Any, real: bool, data: st.DataObject) -> None:
        nonlocal sent
        if real:
            _aim(case, params, body_ids)
        slots = _slots(case, integer_params)
        if slots and data.draw(st.booleans()):
            container, key = data.draw(st.sampled_from(slots))
            current = container[key] if key in _keys(container) else 0  # an absent integer parameter
            kind = str if isinstance(current, str) else float if isinstance(current, float) else int
            container[key] = data.draw(st.sampled_from(EDGES[kind]))
        kwargs = case.as_transport_kwargs(base_url=TEST_URL, headers=headers)
        request = {key: kwargs[key] for key in ("method", "url", "headers", "params", "cookies")
                   if kwargs.get(key) not in (None, {})}
        if "json" in kwargs:  # encoded here: httpx refuses NaN, which a hostile client can send
            request["content"] = json.dumps(kwargs["json"]).encode()
        elif kwargs.get("data") is not None:
            request["content"] = kwargs["data"]
        # A control character cannot travel raw in a URL: a client percent-encodes it, and so does this one.
        request["url"] = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"%{ord(m.group()):02X}", request["url"])
        response = t.client.request(**request)
        sent += 1
        status = response.status_code
        if status < 400:
            return
        error = _error_body(response)
        if status == 501 and error is not None and error.get("code") == "not_implemented":
            return
        problem = "server error" if status >= 500 else "4xx without a JSON {error: string}" if error is None else ""
        if problem:
            t.failures.append(Failure(label, status, problem, response.text, _replay(request)))

    if seed is not None:
        run = hypothesis.seed(seed)(run)
    run()
    return sent


def _slots(case: Any, integer_params: list[str]) -> list[tuple[Any, Any]]:
    """Where an edge value may go: every number and string in the query and the body (two levels deep, so a
    webhook's ``data.epoch`` counts), and the integer query parameters the case left out."""
    if case.query is None:
        case.query = {}
    slots: list[tuple[Any, Any]] = [(case.query, name) for name in integer_params]
    slots += [(case.query, k) for k, v in case.query.items() if k not in integer_params and _scalar(v)]

    def walk(value: Any, depth: int) -> None:
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            if _scalar(item):
                slots.append((value, key))
            elif depth < 2:
                walk(item, depth + 1)

    walk(case.body, 0)
    return slots


def _replay(request: dict[str, Any]) -> str:
    """The request as a curl command (the key left out; NaN kept, which schemathesis' own would refuse)."""
    url = str(request["url"]) + (f"?{urlencode(request['params'], doseq=True)}" if request.get("params") else "")
    body = request.get("content")
    data = f" -H 'Content-Type: application/json' --data-raw {shlex.quote(body.decode(errors='replace'))}" \
        if isinstance(body, bytes) else ""
    return f"curl -X {request['method']} -H 'Authorization: Bearer $KEY'{data} {shlex.quote(url)}"


def _keys(container: Any) -> Any:
    return container if isinstance(container, dict) else range(len(container))


def _scalar(value: Any) -> bool:
    return isinstance(value, int | float | str) and not isinstance(value, bool)


def _aim(case: Any, params: dict[str, Any], body_ids: dict[str, Any]) -> None:
    """Point a case's identifiers at the owner's real rows."""
    for name in list(case.path_parameters or {}):
        if name in params:
            case.path_parameters[name] = params[name]
    for name in list(case.query or {}):
        if name in params:
            case.query[name] = params[name]
    if isinstance(case.body, dict):
        for name in list(case.body):
            if name in body_ids:
                case.body[name] = body_ids[name]
        event = case.body.get("event")
        if isinstance(event, str) and event in WEBHOOK_DATA:
            case.body["data"] = copy.deepcopy(WEBHOOK_DATA[case.body["event"]])
            case.body["modelId"] = body_ids["modelId"]
