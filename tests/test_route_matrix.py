"""Two users, every route: user B calls each operation of the OpenAPI document with user A's identifiers and
must get 403 or 404 (never 2xx, never 5xx); afterwards A's resources are as they were.

The operations come from the document, so a new route is covered without editing this file; a route whose
path parameter or identifier is not mapped below, or that takes none and is not listed with a reason, fails
with a message saying what to add. A's resources are private: a public dataset is legitimately readable. The
operator's routes are for the server's admins only: B gets 403 from each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanner.app import create_app
from tests.conftest import copy_of
from tests.world import (
    DATASET,
    DEPLOYMENT,
    MODEL,
    PROJECT,
    Owned,
    User,
    build,
    make_user,
    openapi_document,
    operations,
    quiet_settings,
)

DOCUMENT = openapi_document()

# Path parameter -> A's value. A new route with another parameter name must be added here.
PATH_VALUES: dict[str, Callable[[Owned], Any]] = {
    "owner": lambda a: a.workspace,
    "project": lambda a: PROJECT,
    "model": lambda a: MODEL,
    "dataset": lambda a: DATASET,
    "image_id": lambda a: a.image_id,
    "key": lambda a: a.image_id.rpartition("-")[2],  # an image's key within its dataset (the annotate routes)
    "key_id": lambda a: a.key_id,
    "export_id": lambda a: a.export_id,
    "deployment": lambda a: DEPLOYMENT,
    "team": lambda a: a.team,
    "invitation_id": lambda a: a.invitation_id,
    "username": lambda a: a.user.username,  # a member of A's team (its owner)
    "id": lambda a: a.integration_id,  # /api/integrations/buckets/{id}
    "import_id": lambda a: a.bucket_import_id,
}

# Query parameters and body properties that name a resource -> A's value. An operation taking any of these
# (or a path parameter) is in the matrix.
IDENTIFIERS: dict[str, Callable[[Owned], Any]] = {
    "modelId": lambda a: a.model_id,
    "runId": lambda a: a.run_id,
    "sessionId": lambda a: a.session_id,
    "imageIds": lambda a: [a.image_id],
    "assetId": lambda a: a.dataset_id,
    "id": lambda a: a.old_dataset_id,
    "owner": lambda a: a.workspace,
    "project": lambda a: PROJECT,
    "model": lambda a: f"ul://{a.workspace}/{PROJECT}/{MODEL}",
    "dataset": lambda a: f"ul://{a.workspace}/datasets/{DATASET}",
    "username": lambda a: a.user.username,
    "integrationId": lambda a: a.integration_id,
}

# An identifier whose name means another resource on one operation: (method, path) -> name -> A's value.
PER_OPERATION: dict[tuple[str, str], dict[str, Callable[[Owned], Any]]] = {
    (method, "/api/workflows"): {"id": lambda a: a.workflow_id} for method in ("GET", "PUT", "DELETE")}

# Required body properties that must hold a valid value for the request to reach its authorization check.
VALID_VALUES: dict[str, Any] = {"assetType": "datasets", "filename": "weights.zip", "event": "epoch_end",
                                "name": "b-copy", "password": "not alice's password", "split": "val",
                                "type": "dataset", "train": 0.8, "val": 0.2}

# Operations outside the matrix, each with the reason.
NOT_TENANT_SCOPED: dict[tuple[str, str], str] = {
    ("GET", "/api/health"): "liveness; no data",
    ("GET", "/api/gpus"): "the GPU catalogue: the same for every caller",
    ("GET", "/api/training/gpu-availability"): "free capacity per GPU type; no user data",
    ("PUT", "/api/storage/uploads/{key}"): "signed URL: the signature is the credential (tests/test_protocol.py "
                                           "checks tampering and expiry)",
    ("GET", "/api/storage/blobs/{sha256}/{filename}"): "signed URL: the signature is the credential",
    ("POST", "/api/autolabel/chunks"): "an auto-annotation worker's signed token is the credential (a forged one is "
                                       "404: tests/autolabel)",
    ("POST", "/api/review/chunks"): "a review scores worker's signed token is the credential (a forged one is 404: "
                                    "tests/review)",
    ("POST", "/api/auth/login"): "checks a username and password: without A's password there is nothing to reach",
    ("POST", "/api/integrations/roboflow/import"): "501 for every caller",
    ("POST", "/api/integrations/roboflow/preview"): "501 for every caller",
    ("POST", "/api/invitations/accept"): "the invitation's token is the credential: a made-up one is 404 like a used "
                                         "or expired one (tests/teams)",
}
# Operations on the caller's own account, or public by design: B gets an answer, which must not show A's
# private resources.
OWN_OR_PUBLIC: dict[tuple[str, str], str] = {
    ("GET", "/api/account/summary"): "the caller's own account",
    ("GET", "/api/api-keys"): "the caller's own keys",
    ("GET", "/api/integrations/buckets"): "the caller's own storage integrations",
    ("POST", "/api/integrations/buckets"): "connects a bucket for the caller (A's are untouched: the snapshot)",
    ("POST", "/api/integrations/buckets/discover"): "lists the buckets of the credentials in the body",
    ("POST", "/api/api-keys"): "makes a key for the caller",
    ("POST", "/api/auth/logout"): "clears the caller's cookie",
    ("POST", "/api/auth/password"): "changes the caller's own password (the current one is required)",
    ("GET", "/api/billing/transactions"): "the caller's own ledger",
    ("GET", "/api/billing/usage-summary"): "the caller's own balance",
    ("GET", "/api/users"): "the caller's own profile, or another user's only when it has public content",
    ("GET", "/api/trash"): "the caller's own trash (a team's with ?owner=: tests/teams/test_trash.py)",
    ("GET", "/api/explore/search"): "public datasets and projects only",
    ("GET", "/api/projects/{owner}"): "lists the owner's public projects: A's private ones must not appear",
    ("GET", "/api/datasets/{owner}"): "lists the owner's public datasets: A's private ones must not appear",
    ("GET", "/api/deployments/{owner}"): "lists the owner's deployments to the owner only: empty for anyone else",
    ("GET", "/metrics"): "the caller's own endpoints in Prometheus text",
    ("POST", "/api/teams"): "creates a team owned by the caller",
}
# Operations for the server's admins only (``AdminPrincipal``), each with what it shows: B, who is no admin, gets
# 403 ``admin_required`` (an admin's answers are tested in tests/operator).
ADMIN_ONLY: dict[tuple[str, str], str] = {
    ("GET", "/api/operator/pools"): "every GPU pool's cost and the credits every account's runs paid on it",
    ("GET", "/api/operator/metrics"): "the same figures in Prometheus text",
}
# Operations that answer 422 to B with A's identifiers, each with the reason (none: each gets a valid body).
ANSWERS_422: dict[tuple[str, str], str] = {}

NOT_SERVED = "Not available on self-hosted Lanner (501)"  # a stub route: 501 for everyone, touches no data


def _operation(method: str, path: str) -> dict[str, Any]:
    return DOCUMENT["paths"][path][method.lower()]


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        target: Any = DOCUMENT
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = target
    return schema


def _body_schema(op: dict[str, Any]) -> dict[str, Any] | None:
    content = (op.get("requestBody") or {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    return _resolve(schema) if schema else None


def _names(op: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Path parameters, query parameters and body properties of an operation."""
    params = op.get("parameters", [])
    body = _body_schema(op) or {}
    return ([p["name"] for p in params if p["in"] == "path"], [p["name"] for p in params if p["in"] == "query"],
            list(body.get("properties", {})))


def _in_matrix(method: str, path: str) -> bool:
    path_names, query, body = _names(_operation(method, path))
    return bool(path_names) or any(name in IDENTIFIERS for name in query + body)


def _classify() -> tuple[list[tuple[str, str]], list[str]]:
    matrix, problems = [], []
    for method, path in operations(DOCUMENT):
        op = _operation(method, path)
        if (method, path) in {**NOT_TENANT_SCOPED, **OWN_OR_PUBLIC, **ADMIN_ONLY} or op.get("summary") == NOT_SERVED:
            continue
        if not _in_matrix(method, path):
            problems.append(f"{method} {path} takes no identifier: map it in IDENTIFIERS, or list it in "
                            "NOT_TENANT_SCOPED or OWN_OR_PUBLIC with a reason")
            continue
        missing = [name for name in _names(op)[0] if name not in PATH_VALUES]
        if missing:
            problems.append(f"{method} {path}: add path parameter(s) {missing} to PATH_VALUES")
            continue
        matrix.append((method, path))
    return matrix, problems


MATRIX, PROBLEMS = _classify()


def _value(schema: dict[str, Any], name: str, owned: Owned) -> Any:
    """A simple valid value for ``schema``: A's identifier or a known-good value when the name says so."""
    if name in IDENTIFIERS:
        return IDENTIFIERS[name](owned)
    if name in VALID_VALUES:
        return VALID_VALUES[name]
    schema = _resolve(schema)
    if "anyOf" in schema:
        return _value(next(s for s in schema["anyOf"] if s.get("type") != "null"), name, owned)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "string":
        return "x" * max(1, schema.get("minLength", 1))
    if kind == "integer":
        return max(1, schema.get("minimum", 1))
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return False
    if kind == "array":
        return [_value(schema.get("items", {}), name, owned)] * max(1, schema.get("minItems", 1))
    if kind == "object":
        return _object(schema, owned)
    return "x"


def _object(schema: dict[str, Any], owned: Owned) -> dict[str, Any]:
    """Required properties with simple values, plus every identifier property set to A's."""
    properties = schema.get("properties", {})
    wanted = [name for name in properties if name in schema.get("required", []) or name in IDENTIFIERS]
    return {name: _value(properties[name], name, owned) for name in wanted}


def request_for(method: str, path: str, owned: Owned) -> dict[str, Any]:
    op = _operation(method, path)
    path_names, query, _ = _names(op)
    url = path
    for name in path_names:
        url = url.replace("{" + name + "}", str(PATH_VALUES[name](owned)))
    params = {name: IDENTIFIERS[name](owned) for name in query if name in IDENTIFIERS}
    for param in op.get("parameters", []):
        if param["in"] == "query" and param.get("required") and param["name"] not in params:
            params[param["name"]] = _value(param["schema"], param["name"], owned)
    request: dict[str, Any] = {"method": method, "url": url, "params": params}
    body = _body_schema(op)
    if body is not None:
        request["json"] = _object(body, owned) if body.get("type") == "object" or "properties" in body else {}
    for name, value in PER_OPERATION.get((method, path), {}).items():
        for part in (params, request.get("json")):
            if isinstance(part, dict) and name in part:
                part[name] = value(owned)
    return request


@pytest.fixture(scope="module")
def two_users(tmp_path_factory: pytest.TempPathFactory,
              sqlite_template: Path) -> Iterator[tuple[TestClient, Owned, User]]:
    work = tmp_path_factory.mktemp("matrix")
    app = create_app(quiet_settings(work / "home", copy_of(sqlite_template, work)))
    with TestClient(app, raise_server_exceptions=False) as client:
        owned = build(app, client, make_user(app, "alice"), work)
        bob = make_user(app, "bob", credits_micros=100_000_000)
        before = snapshot(client, owned)
        yield client, owned, bob
        after = snapshot(client, owned)
        assert after == before, "B changed A's resources"
    app.state.lanner.db.dispose()


def snapshot(client: TestClient, owned: Owned) -> dict[str, Any]:
    """What A sees of everything A owns (signed URLs, which carry an expiry, left out)."""
    a, headers = owned.workspace, owned.user.headers
    reads = {"dataset": f"/api/datasets/{a}/{DATASET}", "images": f"/api/datasets/{a}/{DATASET}/images",
             "class stats": f"/api/datasets/{a}/{DATASET}/class-stats", "datasets": f"/api/datasets/{a}",
             "project": f"/api/projects/{a}/{PROJECT}", "model": f"/api/models/{a}/{PROJECT}/{MODEL}",
             "files": f"/api/models/{a}/{PROJECT}/{MODEL}/files", "keys": "/api/api-keys", "trash": "/api/trash",
             "job": f"/api/models/{a}/{PROJECT}/{MODEL}/training",
             "exports": f"/api/models/{a}/{PROJECT}/{MODEL}/exports",
             "deployment": f"/api/deployments/{a}/{DEPLOYMENT}", "deployments": f"/api/deployments/{a}",
             "deployment logs": f"/api/deployments/{a}/{DEPLOYMENT}/logs",
             "storage integrations": "/api/integrations/buckets",
             "workflows": f"/api/workflows?owner={a}", "workflow": f"/api/workflows?owner={a}&id={owned.workflow_id}",
             "bucket import": f"/api/datasets/{a}/{DATASET}/bucket-imports/{owned.bucket_import_id}"}
    seen = {}
    for name, url in reads.items():
        response = client.get(url, headers=headers)
        assert response.status_code == 200, f"A cannot read {url}: {response.text}"
        seen[name] = _without_volatile(response.json())
    return seen


VOLATILE = {"elapsedMs", "etaMs", "timePerEpochMs"}  # a running job's clock


def _without_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    if isinstance(value, str) and value.startswith("http://testserver/"):
        return "<signed url>"
    return value


def test_every_operation_is_in_the_matrix_or_listed_with_a_reason() -> None:
    assert not PROBLEMS, "\n".join(PROBLEMS)
    listed = {**NOT_TENANT_SCOPED, **OWN_OR_PUBLIC, **ADMIN_ONLY, **ANSWERS_422}
    ops = set(operations(DOCUMENT))
    stale = [op for op in listed if op not in ops]
    assert not stale, f"listed but no longer in the OpenAPI document: {stale}"
    assert all(reason.strip() for reason in listed.values())


@pytest.mark.parametrize("method, path", MATRIX, ids=[f"{m} {p}" for m, p in MATRIX])
def test_b_cannot_reach_what_a_owns(two_users: Any, method: str, path: str) -> None:
    client, owned, bob = two_users
    request = request_for(method, path, owned)
    response = client.request(**request, headers=bob.headers)
    if (method, path) in ANSWERS_422 and response.status_code == 422:
        return
    assert response.status_code in (403, 404), (
        f"B got {response.status_code} from {method} {request['url']} {request.get('params') or ''} "
        f"{request.get('json') or ''}: {response.text[:300]}")
    assert isinstance(response.json().get("error"), str)


@pytest.mark.parametrize("method, path", list(OWN_OR_PUBLIC), ids=[f"{m} {p}" for m, p in OWN_OR_PUBLIC])
def test_own_and_public_operations_show_b_nothing_of_a(two_users: Any, method: str, path: str) -> None:
    client, owned, bob = two_users
    request = request_for(method, path, owned)
    response = client.request(**request, headers=bob.headers)
    assert response.status_code < 500, response.text
    leaked = [secret for secret in owned.secrets() if secret and secret in response.text]
    assert not leaked, f"{method} {path} showed B {leaked}: {response.text[:300]}"


@pytest.mark.parametrize("method, path", list(ADMIN_ONLY), ids=[f"{m} {p}" for m, p in ADMIN_ONLY])
def test_admin_only_operations_refuse_b(two_users: Any, method: str, path: str) -> None:
    client, owned, bob = two_users
    response = client.request(**request_for(method, path, owned), headers=bob.headers)
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "admin_required" and isinstance(response.json()["error"], str)


def test_stub_routes_answer_501_and_touch_nothing(two_users: Any) -> None:
    client, owned, bob = two_users
    stubs = [(m, p) for m, p in operations(DOCUMENT) if _operation(m, p).get("summary") == NOT_SERVED]
    assert stubs
    for method, path in stubs:
        url = path.replace("{owner}", owned.workspace).replace("{dataset}", DATASET)
        response = client.request(method, url, headers=bob.headers)
        assert response.status_code == 501 and response.json()["code"] == "not_implemented", (method, path)


def test_the_matrix_covers_the_routes_that_matter() -> None:
    """A guard on the generator itself: an empty or shrunken matrix would pass vacuously."""
    covered = set(MATRIX)
    assert ("DELETE", "/api/datasets/{owner}/{dataset}") in covered
    assert ("POST", "/api/webhooks/training/metrics") in covered
    assert ("PATCH", "/api/images/{image_id}") in covered
    assert ("POST", "/api/upload/complete") in covered
    assert ("POST", "/api/models/{owner}/{project}/{model}/clone") in covered
    assert ("POST", "/api/projects/{owner}/{project}/clone") in covered
    assert ("POST", "/api/deployments/{owner}/{deployment}/predict") in covered
    assert ("PUT", "/api/datasets/{owner}/{dataset}/annotate/{key}") in covered
    assert ("POST", "/api/datasets/{owner}/{dataset}/proposals") in covered
    assert len(covered) >= 40
