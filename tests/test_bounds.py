"""Input bounds (issue 14): every integer a request carries is bounded by what stores it, floats are finite,
free-form JSON fields are small, and a request body has a size limit. A hostile value is a 4xx that names the
field, never a 500, and the server answers the next request as usual."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanner.app import create_app
from lanner.bounds import JSON_FIELD_MAX_BYTES
from lanner.config import Settings
from tests.conftest import copy_of
from tests.world import DATASET, MODEL, PROJECT, Owned, build, make_user, openapi_document, quiet_settings

BIG = 2**63  # one past SQLite's INTEGER and PostgreSQL's BIGINT
_databases = itertools.count()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Owned]]:
    work = tmp_path_factory.mktemp("bounds")
    if request.param == "sqlite":
        url = copy_of(request.getfixturevalue("sqlite_template"), work)
    else:
        cluster = request.getfixturevalue("postgres")
        name = f"lanner_bounds_{next(_databases)}"
        cluster.execute(f"CREATE DATABASE {name} TEMPLATE lanner_template")
        url = cluster.url(name)
    app = create_app(quiet_settings(work / "home", url))
    with TestClient(app, raise_server_exceptions=False) as client:
        owned = build(app, client, make_user(app, "alice", credits_micros=100_000_000), work)
        yield client, owned
    app.state.lanner.db.dispose()


def _webhook(event: str, data: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return "POST", "/api/webhooks/training/metrics", {"json": {"event": event, "modelId": "{model_id}", "data": data}}


D = f"/api/datasets/alice/{DATASET}"
M = f"/api/models/alice/{PROJECT}/{MODEL}"
# (method, path, request keywords, the field the error must name): {model_id} is the owner's model.
HUGE_INTEGERS = {
    "images offset": ("GET", f"{D}/images?offset={BIG}", {}, "offset"),
    "images cursor": ("GET", f"{D}/images?cursor={BIG}", {}, "cursor"),
    "explore offset": ("GET", f"/api/explore/search?offset={BIG}", {}, "offset"),
    "trash page": ("GET", f"/api/trash?page={BIG}", {}, "page"),
    "export version": ("GET", f"{D}/export?v={BIG}", {}, "v"),
    "compare base": ("GET", f"{D}/versions/compare?base={BIG}", {}, "base"),
    "compare head": ("GET", f"{D}/versions/compare?base=1&head={BIG}", {}, "head"),
    "compare cursor": ("GET", f"{D}/versions/compare?base=1&cursor={BIG}", {}, "cursor"),
    "clone version": ("POST", f"{D}/clone", {"json": {"version": BIG}}, "version"),
    "describe version": ("PATCH", f"{D}/export", {"json": {"version": BIG}}, "version"),
    "restore version": ("POST", f"{D}/restore", {"json": {"version": BIG}}, "version"),
    "merge target class": ("POST", f"{D}/classes/merge", {"json": {"sourceClassIds": [0], "targetClassId": BIG}},
                           "targetClassId"),
    "merge source class": ("POST", f"{D}/classes/merge", {"json": {"sourceClassIds": [BIG], "targetClassId": 0}},
                           "sourceClassIds"),
    "delete classes": ("POST", f"{D}/classes/delete", {"json": {"classIds": [BIG]}}, "classIds"),
    "split seed": ("POST", f"{D}/splits/redistribute", {"json": {"train": 1, "val": 1, "seed": BIG}}, "seed"),
    "assistant minLabels": ("PUT", f"{D}/assistant", {"json": {"minLabels": BIG}}, "minLabels"),
    "assistant epochs": ("PUT", f"{D}/assistant", {"json": {"epochs": BIG}}, "epochs"),
    "label-next limit": ("GET", f"{D}/label-next?limit={BIG}", {}, "limit"),
    "upload totalBytes": ("POST", "/api/upload/signed-url", {"json": {"assetType": "datasets", "filename": "a.zip",
                                                                      "totalBytes": BIG}}, "totalBytes"),
    "checkpoint runId": ("POST", "/api/webhooks/models/upload", {"json": {"modelId": "{model_id}",
                                                                         "filename": "best.pt", "runId": BIG}},
                         "runId"),
    "model epochs": ("POST", "/api/models", {"json": {"project": PROJECT, "model": "other", "epochs": BIG}},
                     "epochs"),
    "model PATCH epochs": ("PATCH", M, {"json": {"epochs": BIG}}, "epochs"),
    "model PATCH bestEpoch": ("PATCH", M, {"json": {"bestEpoch": BIG}}, "bestEpoch"),
    "start fullRunEpochs": ("POST", "/api/training/start", {"json": {"modelId": "{model_id}",
                                                                    "fullRunEpochs": BIG}}, "fullRunEpochs"),
    "estimate images": ("POST", "/api/training/estimate", {"json": {"model": "yolo11n.yaml",
                                                                   "imageCount": {"train": BIG}}}, "train"),
    "webhook epochs": ("POST", "/api/webhooks/training/metrics", {"json": {
        "event": "training_started", "project": f"alice/{PROJECT}", "name": "again", "data": {"epochs": BIG}}},
        "epochs"),
    "webhook epoch": _webhook("epoch_end", {"epoch": BIG}) + ("epoch",),
    "webhook total_epochs": _webhook("epoch_end", {"epoch": 0, "total_epochs": BIG}) + ("total_epochs",),
    "webhook chunkId": _webhook("console_output", {"chunkId": BIG, "content": "x"}) + ("chunkId",),
    "webhook lineCount": _webhook("console_output", {"chunkId": 1, "content": "x", "lineCount": BIG})
    + ("lineCount",),
    "webhook runId": _webhook("training_progress", {"runId": BIG}) + ("runId",),
    "webhook runId as text": _webhook("training_progress", {"runId": str(BIG)}) + ("runId",),
    "webhook bestEpoch": _webhook("training_complete", {"results": {"bestEpoch": BIG}}) + ("bestEpoch",),
    "webhook metric past 64 bits": _webhook("epoch_end", {"epoch": 0, "metrics": {"x": 2**64}}) + ("data",),
}


def _send(client: TestClient, owned: Owned, method: str, path: str, kwargs: dict[str, Any]) -> Any:
    text = json.dumps(kwargs.get("json")).replace("{model_id}", owned.model_id)
    path = path.replace("{image_id}", owned.image_id)
    body = {"content": text, "headers": {**owned.user.headers, "Content-Type": "application/json"}} \
        if "json" in kwargs else {"headers": owned.user.headers}
    return client.request(method, path, **body)


@pytest.mark.parametrize("case", HUGE_INTEGERS.values(), ids=HUGE_INTEGERS.keys())
def test_an_integer_past_64_bits_is_a_4xx_naming_the_field(world: Any, case: tuple) -> None:
    client, owned = world
    method, path, kwargs, field = case
    response = _send(client, owned, method, path, kwargs)
    assert 400 <= response.status_code < 500, response.text
    assert field in response.json()["error"], response.text
    assert client.get(D, headers=owned.user.headers).status_code == 200  # the server carries on


def _integer_schemas(node: Any, where: str, document: dict[str, Any], seen: frozenset[str] = frozenset(),
                     ) -> Iterator[tuple[str, dict[str, Any]]]:
    """Integer schemas under ``node``, following ``$ref`` into the components (each once per path)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref not in seen:
            target = document
            for part in ref.removeprefix("#/").split("/"):
                target = target[part]
            yield from _integer_schemas(target, f"{where}->{ref.rsplit('/', 1)[-1]}", document, seen | {ref})
        if node.get("type") == "integer":
            yield where, node
        for key, value in node.items():
            yield from _integer_schemas(value, f"{where}.{key}", document, seen)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _integer_schemas(value, f"{where}[{i}]", document, seen)


def test_every_integer_input_in_the_openapi_document_is_bounded() -> None:
    """A new integer parameter or body field without a ``lanner.bounds`` type fails here, before a fuzzer finds
    it: every integer a request may carry has a minimum and a maximum."""
    document = openapi_document()
    inputs = [(f"{method.upper()} {path}", {"parameters": op.get("parameters", []), "body": op.get("requestBody")})
              for path, item in document["paths"].items() for method, op in item.items()]
    unbounded = sorted({where for label, node in inputs for where, schema in _integer_schemas(node, label, document)
                        if "enum" not in schema  # a closed list of values is its own bound
                        and ("maximum" not in schema or not {"minimum", "exclusiveMinimum"} & set(schema))})
    assert not unbounded, "integers without bounds (use lanner.bounds types):\n" + "\n".join(unbounded)


NUL_TEXT = {
    "search query": ("GET", "/api/explore/search?task=%00&q=a%00b", None),
    "path parameter": ("GET", f"/api/projects/alice/{PROJECT}%00", None),
    "login username": ("POST", "/api/auth/login", '{"username": "alice\\u0000", "password": "x"}'),
    "model project": ("POST", "/api/models", '{"project": "p\\u0000", "model": "m"}'),
    "webhook modelId": ("POST", "/api/webhooks/training/metrics", '{"event": "epoch_end", "modelId": "\\u0000"}'),
}


@pytest.mark.parametrize("case", NUL_TEXT.values(), ids=NUL_TEXT.keys())
def test_text_with_a_nul_character_is_never_a_500(world: Any, case: tuple) -> None:
    """PostgreSQL cannot hold NUL in text, and its driver refused every query with one (found by fuzz_api.py):
    now a 422 there; SQLite can hold it, and answers as for any other text."""
    client, owned = world
    method, path, text = case
    response = client.request(method, path, content=text,
                              headers={**owned.user.headers, "Content-Type": "application/json"})
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert isinstance(response.json()["error"], str)


# --- floats ------------------------------------------------------------------------------------------------

NON_FINITE = {
    "split fraction infinite": ("POST", f"{D}/splits/redistribute", '{"train": Infinity, "val": 1}', "train"),
    "cost cap infinite": ("POST", "/api/training/start", '{"modelId": "{model_id}", "maxCostCents": Infinity}',
                          "maxCostCents"),
    "estimate deadline infinite": ("POST", "/api/training/estimate",
                              '{"model": "yolo11n.yaml", "imageCount": {"train": 10}, "deadlineMinutes": Infinity}',
                              "deadlineMinutes"),
    "model bestFitness NaN": ("PATCH", M, '{"bestFitness": NaN}', "bestFitness"),
    "metadata with NaN": ("PATCH", D, '{"metadata": {"score": NaN}}', "metadata"),
    "label box NaN": ("PATCH", "/api/images/{image_id}",
                           '{"labels": [{"classId": 0, "bbox": [0.5, NaN, 0.1, 0.1]}]}', "bbox"),
    "checkpoint size infinite": ("POST", "/api/webhooks/models/upload",
                                 '{"modelId": "{model_id}", "filename": "x.pt", "size": Infinity}', "size"),
}


@pytest.mark.parametrize("case", NON_FINITE.values(), ids=NON_FINITE.keys())
def test_nan_and_infinity_are_refused_where_they_would_be_stored(world: Any, case: tuple) -> None:
    client, owned = world
    method, path, text, field = case
    response = client.request(method, path.replace("{image_id}", owned.image_id),
                              content=text.replace("{model_id}", owned.model_id),
                              headers={**owned.user.headers, "Content-Type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert field in response.json()["error"], response.text


def test_the_trainers_nan_metrics_are_kept_as_null(world: Any) -> None:
    """Compatibility, not a bug: the trainer sends null for a non-finite value, an older one the NaN literal. The
    typed fields above refuse NaN, so the webhook turns it into null first and the epoch is kept."""
    client, owned = world
    response = client.post("/api/webhooks/training/metrics", headers={**owned.user.headers,
                                                                      "Content-Type": "application/json"},
                           content=json.dumps({"event": "epoch_end", "modelId": owned.model_id, "data": {
                               "epoch": 1, "fitness": math.nan, "metrics": {"train/box_loss": math.inf}}}))
    assert response.status_code == 200, response.text
    model = client.get(M, headers=owned.user.headers)
    assert model.status_code == 200, model.text
    epoch = next(r for r in model.json()["model"]["trainResults"] if r["epoch"] == 1)
    assert epoch["metrics"].get("train/box_loss") is None


# --- free-form JSON fields ---------------------------------------------------------------------------------

P = f"/api/projects/alice/{PROJECT}"
JSON_FIELDS = {
    "dataset create metadata": ("POST", "/api/datasets", {"name": "big"}, "metadata"),
    "dataset PATCH metadata": ("PATCH", D, {}, "metadata"),
    "dataset PATCH classNames": ("PATCH", D, {}, "classNames"),
    "project create metadata": ("POST", "/api/projects", {"name": "big"}, "metadata"),
    "project PATCH metadata": ("PATCH", P, {}, "metadata"),
    "project PATCH tags": ("PATCH", P, {}, "tags"),
    "model create metadata": ("POST", "/api/models", {"project": PROJECT, "model": "big"}, "metadata"),
    "model PATCH metadata": ("PATCH", M, {}, "metadata"),
    "model PATCH trainArgs": ("PATCH", M, {}, "trainArgs"),
    "start trainArgs": ("POST", "/api/training/start", {"modelId": "{model_id}"}, "trainArgs"),
}


def _too_big(field: str) -> Any:
    if field in ("classNames", "tags"):
        return ["c" * 1000] * (JSON_FIELD_MAX_BYTES // 1000 + 1)
    return {"blob": "x" * JSON_FIELD_MAX_BYTES}


def _fits(field: str) -> Any:
    return ["c" * 1000] * 60 if field in ("classNames", "tags") else {"blob": "x" * (JSON_FIELD_MAX_BYTES - 100)}


@pytest.mark.parametrize("case", JSON_FIELDS.values(), ids=JSON_FIELDS.keys())
def test_a_free_form_field_over_its_limit_is_a_422_naming_it(world: Any, case: tuple) -> None:
    client, owned = world
    method, path, body, field = case
    response = _send(client, owned, method, path, {"json": {**body, field: _too_big(field)}})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error.startswith(field) and str(JSON_FIELD_MAX_BYTES) in error, error
    response = _send(client, owned, method, path, {"json": {**body, field: _fits(field)}})
    assert response.status_code != 422 and response.status_code < 500, response.text  # (start: 409, training)


@pytest.mark.parametrize("value, why", [({"n": 2**64}, "integers must fit in 64 bits"),
                                        ({"n": json.loads("[" * 300 + "]" * 300)}, "nesting")])
def test_metadata_the_database_cannot_store_is_a_422(world: Any, value: Any, why: str) -> None:
    client, owned = world
    response = client.patch(D, headers=owned.user.headers, json={"metadata": value})
    assert response.status_code == 422 and why in response.json()["error"], response.text
    metadata = {"n": 2**63 - 1, "deep": json.loads("[" * 200 + "]" * 200)}  # what it can store is kept
    assert client.patch(D, headers=owned.user.headers, json={"metadata": metadata}).status_code == 200
    assert client.get(D, headers=owned.user.headers).json()["dataset"]["metadata"] == metadata


def test_webhook_data_nested_past_what_can_be_stored_is_a_422(world: Any) -> None:
    """600 levels cannot be stored (orjson: 255): a 422, never a crash. The webhook parses its body with
    pydantic's own JSON parser (``lanner.http.direct_route``), which refuses that nesting as it reads; a parser that
    let it in (Python's allows about 1000) must not reach the NaN walk with it either."""
    client, owned = world
    nested = "[" * 600 + "]" * 600
    response = client.post("/api/webhooks/training/metrics", headers={**owned.user.headers,
                                                                      "Content-Type": "application/json"},
                           content=f'{{"event": "system_metrics", "modelId": "{owned.model_id}", "data": {{"a": '
                                   f'{nested}}}}}')
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith(("data", "request body is not valid JSON")), response.text


# --- the request body limit --------------------------------------------------------------------------------

LIMIT = 64 * 1024


@pytest.fixture
def small_limit(tmp_path: Path, sqlite_template: Path) -> Iterator[tuple[TestClient, Owned]]:
    app = create_app(quiet_settings(tmp_path / "home", copy_of(sqlite_template, tmp_path), max_body_bytes=LIMIT))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, build(app, client, make_user(app, "alice"), tmp_path)
    app.state.lanner.db.dispose()


def _assert_too_large(response: Any) -> None:
    assert response.status_code == 413, response.text
    assert response.json()["code"] == "body_too_large" and str(LIMIT) in response.json()["error"]


def test_a_declared_length_over_the_limit_is_a_413_before_reading(small_limit: Any) -> None:
    client, owned = small_limit
    body = json.dumps({"event": "console_output", "modelId": owned.model_id,
                       "data": {"chunkId": 7, "content": "x" * LIMIT}})
    _assert_too_large(client.post("/api/webhooks/training/metrics", content=body,
                                  headers={**owned.user.headers, "Content-Type": "application/json"}))
    under = body.replace("x" * LIMIT, "x" * (LIMIT - 1000))
    response = client.post("/api/webhooks/training/metrics", content=under,
                           headers={**owned.user.headers, "Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    # the signed upload PUT streams files under its own limit (LANNER_MAX_UPLOAD_BYTES)
    signed = client.post("/api/upload/signed-url", headers=owned.user.headers, json={
        "assetType": "datasets", "assetId": owned.dataset_id, "filename": "big.zip"}).json()
    response = client.put(signed["uploadUrl"], content=b"z" * (4 * LIMIT))
    assert response.status_code == 200 and response.json()["size"] == 4 * LIMIT, response.text


def test_a_chunked_body_is_counted_as_it_streams(small_limit: Any) -> None:
    client, owned = small_limit
    chunks = [b'{"event": "console_output", "data": {"chunkId": 1, "content": "'] + [b"x" * 8192] * 10 + [b'"}}']
    response = client.post("/api/webhooks/training/metrics", content=iter(chunks),
                           headers={**owned.user.headers, "Content-Type": "application/json"})
    assert "content-length" not in response.request.headers
    _assert_too_large(response)


def test_the_default_limit_takes_the_trainers_largest_body() -> None:
    """``training_complete`` of a 1000-class detection model, as ``ultralytics/utils/callbacks/platform.py``
    sends it: confusion matrix, four curves of 101 points per class, 5000 validation rows."""
    classes = 1000
    curves = [{"type": kind, "x": [i / 100 for i in range(101)], "y": [[0.123456789012345] * 101] * classes}
              for kind in ("pr_curve", "f1_curve", "p_curve", "r_curve")]
    body = {"event": "training_complete", "data": {
        "results": {"metrics": {"fitness": 0.5}, "validation": {"rows": [["image00001", 3, 1, 0]] * 5000}},
        "plots": [{"type": "confusion_matrix", "matrix": [[12.0] * (classes + 1)] * (classes + 1)}, *curves],
        "classNames": [f"class {i}" for i in range(classes)]}}
    size = len(json.dumps(body))
    assert 10 * 1024**2 < size < Settings().max_body_bytes
