"""Fixtures: an app per test on SQLite or on a real PostgreSQL, users with keys, a fake executor, and the SDK."""

from __future__ import annotations

import functools
import gc
import itertools
import re
import shutil
import subprocess
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lanner.config import Settings
from lanner.db.migrate import upgrade_database
from tests.pg import PostgresCluster

if TYPE_CHECKING:  # the app, its test client, the SDK and the fakes are imported by the fixtures that need them:
    # a test of one library module (tests/gpus/test_priors.py) does not pay for importing the whole app (2 s)
    from fastapi.testclient import TestClient
    from ultralytics_platform import Platform

    from tests.training.fakes import FakeExecutor

pytest_plugins = ["tests.trained"]  # tiny_weights: the session's tiny trained detector, for tests needing real weights

TEST_URL = "http://testserver"
REPOSITORY = Path(__file__).resolve().parent.parent
_db_counter = itertools.count()


def analyse_each_routes_dependencies_once() -> None:
    """A served process analyses each route once; a test process builds an app per test, and FastAPI analysed
    every route again for each (on the app's first request: its dependency tree, ~0.2 s of CPU, then a pydantic
    field for its body and one for its response, ~0.07 s more: together a sixth of what the fast lane's workers
    did). What it builds is the same for every app (the same path, endpoint, ``Depends`` and types; an app's
    ``dependency_overrides`` are looked up per request), so it is kept by those, as a served process keeps it.
    Without FastAPI's private builders (another version) the tests only run slower."""
    import fastapi.routing

    _keep_once(fastapi.routing, "_build_dependant_with_parameterless_dependencies",
               lambda *, path, call, dependencies: (path, call, *dependencies))
    # The body field is built from the dependency tree's body parameters (the kept ones above: the same objects).
    _keep_once(fastapi.routing, "_get_body_field",
               lambda *, body_params, name, embed_body_fields: (name, embed_body_fields, *body_params))
    _keep_once(fastapi.routing, "create_model_field",
               lambda name, type_, default=None, field_info=None, alias=None, mode="validation": (
                   None if default is not None or field_info is not None or alias is not None
                   else (name, type_, mode)))


def _keep_once(module: Any, name: str, key_of: Callable[..., tuple[Any, ...] | None]) -> None:
    """Replace ``module.name`` with a version that builds once per key: ``key_of`` takes the same arguments and
    names what the answer depends on (None: not kept). Objects in a key are kept by their identity, with the
    key's objects held in the entry so that an identity is never reused."""
    build = getattr(module, name, None)
    if build is None or hasattr(build, "built"):
        return
    built: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}

    @functools.wraps(build)
    def build_once(*args: Any, **kwargs: Any) -> Any:
        parts = key_of(*args, **kwargs)
        if parts is None:
            return build(*args, **kwargs)
        key = tuple(map(_identity, parts))
        if key not in built:
            built[key] = (parts, build(*args, **kwargs))
        return built[key][1]

    build_once.built = built  # type: ignore[attr-defined]
    setattr(module, name, build_once)


def _identity(part: Any) -> Any:
    """A key's part: strings, flags and types as themselves (a type such as ``list[Item]`` is made anew each
    time an annotation is read, and is equal to the last one), anything else by its identity."""
    if isinstance(part, (str, bool, type, types.GenericAlias)) or typing.get_origin(part) is not None:
        try:
            return (type(part), part, hash(part))
        except TypeError:  # an annotation with an unhashable part
            pass
    return id(part)


# A test process holds millions of objects that live as long as it does (torch, ultralytics, the app's modules,
# the collected tests); each full collection walked them all (~0.2 s) and took a tenth of a test process's CPU.
# Collections come 14 times less often (a young generation of 10,000 objects, not 700), and what exists once the
# tests are collected is frozen out of the collector's sight (as a served process freezes its start-up objects,
# ``lanner.app``). Garbage is still collected: refcounts free most of it, and cycles among what tests create are
# collected as before, only in larger batches.
gc.set_threshold(10_000, 10, 10)


def pytest_collection_finish(session: pytest.Session) -> None:
    if "fastapi.routing" in sys.modules:  # a test of one library module does not import FastAPI for this
        analyse_each_routes_dependencies_once()
    gc.collect()
    gc.freeze()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-examples", type=int, default=40, help="cases sent to each operation by "
                     "tests/test_fuzz.py (default 40, as make test; make test-fast sends fewer)")


def _repository_changes() -> set[str]:
    """Untracked and modified paths, ignored ones included (weights/, runs/ and .lanner/ are ignored)."""
    status = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "--", "weights",
                             "runs", ".lanner", "datasets"], cwd=REPOSITORY, capture_output=True, text=True)
    return set(status.stdout.splitlines())


@pytest.fixture(scope="session", autouse=True)
def tests_never_write_into_the_repository() -> Iterator[None]:
    """The trainer's default runs, weights and datasets folders are under the git root: a test that forgets to
    point them at a temporary folder writes there (a 5 MB best.pt was once committed that way)."""
    before = _repository_changes()
    yield
    written = _repository_changes() - before
    assert not written, f"tests wrote into the repository: {sorted(written)[:10]}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need the PostgreSQL server (its fixture, or the postgresql case of a parametrised database) are
    marked ``postgres``: ``make test-fast`` leaves them out with ``-m "not postgres"``.

    Then the files are ordered longest first, as far as their marks tell: files with an end-to-end test (real
    servers, trainers, Ray: 20 s to 4 min each), then browser files, then the rest (mostly under 10 s). The two
    workers take whole files in this order (``--dist loadfile --no-loadscope-reorder``), so the run ends on short
    files; xdist's own order (most tests first) left the one- to three-test e2e files for last: the last 7 % of
    the tests took 18 of the run's 41 minutes (2026-12-07). Within a file the order is unchanged (some tests
    build on the one before)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if "postgres" in getattr(item, "fixturenames", ()) or (callspec is not None and "postgresql" in callspec.id):
            item.add_marker(pytest.mark.postgres)
    rank: dict[str, int] = {}  # file -> 0 (has an e2e test), 1 (a browser test), 2
    for item in items:
        kind = 0 if item.get_closest_marker("e2e") else 1 if item.get_closest_marker("browser") else 2
        rank[item.path.as_posix()] = min(rank.get(item.path.as_posix(), 2), kind)
    items.sort(key=lambda item: rank[item.path.as_posix()])  # stable: a file's tests stay in order


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster().start()
    cluster.execute("CREATE DATABASE lanner_template")
    upgrade_database(cluster.url("lanner_template"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once: each test copies it (0.5 ms) instead of running every migration (200 ms)."""
    path = tmp_path_factory.mktemp("template") / "lanner.db"
    upgrade_database(f"sqlite:///{path}")
    return path


def copy_of(template: Path, folder: Path) -> str:
    """The URL of a copy of ``sqlite_template`` in ``folder`` (``lanner.db``): a migrated database in 0.5 ms."""
    shutil.copyfile(template, folder / "lanner.db")
    return f"sqlite:///{folder / 'lanner.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return copy_of(request.getfixturevalue("sqlite_template"), tmp_path)
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    name = f"lanner_test_{next(_db_counter)}"
    cluster.execute(f"CREATE DATABASE {name} TEMPLATE lanner_template")
    return cluster.url(name)


# Tests make many requests per key and per address quickly: generous limits keep the rate-limit code on the path
# without refusing anything; tests of the limits themselves set tight ones.
GENEROUS_LIMITS = {name: "100000/minute" for name in ("auth_failure_limit_per_ip", "login_limit_per_username",
                                                       "login_limit_per_username_and_address", "api_rate_limit",
                                                       "worker_rate_limit", "inference_rate_limit")}


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL,
                    secret_key="test-secret", api_key_cache_seconds=0, **GENEROUS_LIMITS)


@pytest.fixture
def app(settings: Settings) -> Any:
    from lanner.app import create_app

    analyse_each_routes_dependencies_once()
    application = create_app(settings)
    yield application
    application.state.lanner.db.dispose()


@pytest.fixture
def client(app: Any) -> Iterator[TestClient]:
    from fastapi.testclient import TestClient

    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def fake_executor(app: Any) -> FakeExecutor:
    """The app's runs go to a fake executor: nothing trains, and a test sets what each job reports."""
    from tests.training.fakes import FakeExecutor

    executor = FakeExecutor()
    app.state.training.use_executor(executor)
    return executor


@dataclass
class Account:
    username: str
    user_id: str
    key: str
    headers: dict[str, str]


@functools.cache
def password_hash(password: str) -> str:
    """A hash of ``password`` as ``create_user`` makes it (scrypt, salted), made once per process and given to
    every account ``make_account`` makes with it: a hash costs ~50 ms of CPU on purpose, and a page test makes up
    to five accounts. A sign-in verifies it like any other."""
    from lanner.accounts.security import hash_password

    return hash_password(password)


@pytest.fixture
def make_account(app: Any) -> Callable[..., Account]:
    from lanner.accounts import service
    from lanner.billing import service as billing_service

    def make(username: str = "alice", *, tier: str = "free", password: str | None = None,
             credits_micros: int = 0, admin: bool = False) -> Account:
        with app.state.lanner.db.session() as session:
            user = service.create_user(session, username=username, tier=tier, is_admin=admin)
            if password is not None:
                service.check_new_password(password)
                user.password_hash = password_hash(password)
            if credits_micros:
                billing_service.top_up(session, user_id=user.id, micros=credits_micros, description="Initial credits")
            _, key = service.create_api_key(session, user=user)
            return Account(user.username, user.id, key, {"Authorization": f"Bearer {key}"})

    return make


@pytest.fixture
def alice(make_account: Callable[..., Account]) -> Account:
    return make_account("alice", password="correct horse")


@pytest.fixture
def bob(make_account: Callable[..., Account]) -> Account:
    return make_account("bob")


def csrf_headers(client: TestClient) -> dict[str, str]:
    """The header a browser page sends with a write made with its session cookie (``lanner.accounts.csrf``): the
    token of a page's ``<meta name="csrf-token">``; the visit also gives ``client`` the token's cookie."""
    page = client.get("/login")  # signed in: it redirects to the home page, which carries the token too
    match = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
    assert match, page.text[:500]
    return {"X-CSRFToken": match.group(1)}


@pytest.fixture
def sdk(client: TestClient) -> Callable[[Account], Platform]:
    """The official SDK, talking to the in-process app through the test client."""

    from ultralytics_platform import Platform

    def make(account: Account) -> Platform:
        return Platform(api_key=account.key, base_url=TEST_URL, http_client=client, max_retries=0)

    return make
