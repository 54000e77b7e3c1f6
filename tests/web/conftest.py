"""Web tests.

In-process page tests run on SQLite (the pages add no SQL of their own; the services they call are tested on
both databases). Browser tests (marker ``browser``) drive Debian's chromium (``make browser-test-deps``
installs it; Playwright never downloads a browser) against a real ``lanner serve``, one per test module:

- ``web_server``: the server, with ``user(name)`` to create a user (password ``PASSWORD``) and an API key, ``db``
  (its database, for setting up data), ``cli(...)`` (``lanner`` against it) and ``api(user, method, path)``;
- ``page`` (and ``page_without_js``): a fresh browser context at 1280×800 on the server. Every request it makes
  is recorded, and any to another host is blocked and fails the test at teardown, as does any error in the
  browser's console (a Content-Security-Policy violation among them), an uncaught script error or a static file
  that did not load; ``new_context``/``check_recorder`` do the same for a context a test opens itself;
- ``bob``: the second user, with ``PASSWORD`` as ``alice`` has (tests/conftest.py), so page tests sign in as either;
- ``signed_in(page, user)``: signs in through the form;
- ``screenshot(page, name)``: writes ``docs/screenshots/<name>.png`` when ``LANNER_SCREENSHOTS=1`` (``make
  screenshots``), else a temporary file, so a test run leaves the committed images alone;
- ``webhook(...)`` and ``a_run(...)``: training reported as the trainer reports it (with the user's key), for the
  project and model pages."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from ultralytics_platform import Platform

from lanner.accounts import service as accounts_service
from lanner.billing import service as billing_service
from lanner.config import Settings
from lanner.db import Database
from lanner.synthetic import make_detection_dataset
from tests.conftest import REPOSITORY, copy_of
from tests.datasets.helpers import upload_dataset
from tests.servers import Server, lanner_cli, start_server
from tests.web.pages import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
VIEWPORT = {"width": 1280, "height": 800}
SCREENSHOTS = REPOSITORY / "docs" / "screenshots"
LOCAL_SCHEMES = ("data:", "blob:", "about:")
ASSET_TYPES = ("stylesheet", "script", "image", "font", "media")


@pytest.fixture
def bob(make_account: Any) -> Any:
    return make_account("bob", password=PASSWORD)


@pytest.fixture
def database_url(tmp_path: Path, sqlite_template: Path) -> str:
    """SQLite only (a copy of the migrated template)."""
    return copy_of(sqlite_template, tmp_path)


@dataclass
class User:
    username: str
    key: str
    user_id: str = ""
    password: str = PASSWORD

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@dataclass
class WebServer:
    server: Server
    users: dict[str, User] = field(default_factory=dict)
    _db: Database | None = None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def db(self) -> Database:
        """The server's database, written straight from the test (a CLI process per change costs a second)."""
        if self._db is None:
            self._db = Database(Settings(home=self.server.home, public_url=self.url).resolved_database_url)
        return self._db

    def cli(self, *args: str) -> str:
        return lanner_cli(self.server.home, *args, LANNER_PUBLIC_URL=self.url)

    def user(self, username: str, *, credits: float = 0) -> User:
        """The user ``username`` (created with an API key on first use)."""
        if username not in self.users:
            with self.db.session() as session:
                user = accounts_service.create_user(session, username=username, password=PASSWORD)
                if credits:
                    billing_service.top_up(session, user_id=user.id, description="Initial credits",
                                           micros=billing_service.dollars_to_micros(credits))
                self.users[username] = User(username, accounts_service.create_api_key(session, user=user)[1], user.id)
        return self.users[username]

    def api(self, user: User, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A request as ``user``; a server that does not answer in 30 s fails with the end of its log (which names
        a transaction that held the database's write lock for long: ``lanner.db``)."""
        try:
            return httpx.request(method, f"{self.url}{path}", headers=user.headers, timeout=30, **kwargs)
        except httpx.TimeoutException as exc:
            tail = self.server.log.read_text(errors="replace")[-6000:]
            raise AssertionError(f"{method} {path}: no answer in 30 s ({exc}); the server's log ends:\n{tail}") from exc

    def upload_shapes(self, user: User, name: str, folder: Path, *, train: int, val: int, size: int,
                      seed: int) -> None:
        """A synthetic detection dataset ``name`` of ``user``'s, zipped and uploaded as the SDK uploads one."""
        root = folder / name
        make_detection_dataset(root, train=train, val=val, size=size, seed=seed)
        archive = Path(shutil.make_archive(str(folder / name), "zip", root))
        with httpx.Client(timeout=60) as http:
            upload_dataset(Platform(base_url=self.url, api_key=user.key, timeout=60), http, user.username, name,
                           archive)

    def stop(self) -> None:
        if self._db is not None:
            self._db.dispose()
        self.server.stop()


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    web = WebServer(start_server(tmp_path_factory.mktemp("web-server")))
    yield web
    web.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"browser tests need {CHROMIUM}: run `make browser-test-deps` (apt-get install chromium)")
    # optional dependency: only browser tests need Playwright
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


def foreign_requests(urls: list[str], server_url: str) -> list[str]:
    """The URLs among ``urls`` that are not on the server (``data:`` and the like stay in the browser)."""
    host = urlsplit(server_url).netloc
    return [u for u in urls if not u.startswith(LOCAL_SCHEMES) and urlsplit(u).netloc != host]


@dataclass
class Recorder:
    """What a browser context did: every request's URL, console errors and uncaught page errors."""

    server_url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def attach(self, context: Any) -> None:
        context.on("request", lambda request: self.requests.append(request.url))
        context.on("console", self._console)
        context.on("weberror", lambda error: self.errors.append(str(error.error)))
        context.on("response", self._response)

        def block_other_hosts(route: Any) -> None:
            if foreign_requests([route.request.url], self.server_url):
                route.abort()  # nothing leaves the machine; the request is still recorded, and fails the test
            else:
                route.continue_()

        context.route("**/*", block_other_hosts)

    def _console(self, message: Any) -> None:
        # A page answered 4xx on purpose (a wrong password: 401) is logged as a failed load; a failed asset is
        # caught by _response, with its URL.
        if message.type == "error" and not message.text.startswith("Failed to load resource: the server responded"):
            self.errors.append(message.text)

    def _response(self, response: Any) -> None:
        if response.status >= 400 and response.request.resource_type in ASSET_TYPES:
            self.errors.append(f"{response.status} for {response.url}")


def new_context(browser: Any, web_server: WebServer, **options: Any) -> tuple[Any, Recorder]:
    context = browser.new_context(viewport=VIEWPORT, base_url=web_server.url, **options)
    recorder = Recorder(web_server.url)
    recorder.attach(context)
    return context, recorder


def check_recorder(recorder: Recorder) -> None:
    foreign = foreign_requests(recorder.requests, recorder.server_url)
    assert not foreign, f"the page requested other hosts than the server: {foreign}"
    assert not recorder.errors, f"errors in the browser: {recorder.errors}"


@pytest.fixture
def page(browser: Any, web_server: WebServer) -> Iterator[Any]:
    context, recorder = new_context(browser, web_server)
    yield context.new_page()
    context.close()
    check_recorder(recorder)


@pytest.fixture
def page_without_js(browser: Any, web_server: WebServer) -> Iterator[Any]:
    context, recorder = new_context(browser, web_server, java_script_enabled=False)
    yield context.new_page()
    context.close()
    check_recorder(recorder)


def signed_in(page: Any, user: User, next_path: str = "/") -> Any:
    """Sign ``user`` in through the form (as a person would), ending on ``next_path``."""
    page.goto(next_path)
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(user.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**{next_path}")
    return page


def screenshot(page: Any, name: str) -> Path:
    folder = SCREENSHOTS if os.environ.get("LANNER_SCREENSHOTS") == "1" else Path(tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    return path


METRICS = {"train/box_loss": 1.5, "train/cls_loss": 0.8, "val/box_loss": 1.7, "metrics/mAP50(B)": 0.3,
           "metrics/mAP50-95(B)": 0.2, "metrics/precision(B)": 0.5, "metrics/recall(B)": 0.4}


def webhook(web_server: WebServer, user: User, event: str, data: dict[str, Any], **fields: Any) -> dict[str, Any]:
    response = web_server.api(user, "POST", "/api/webhooks/training/metrics",
                              json={"event": event, "data": data, **fields})
    assert response.status_code == 200, response.text
    return response.json()


def a_run(web_server: WebServer, user: User, name: str, epochs: int, gain: float = 0.0, *, project: str = "shapes",
          **args: Any) -> str:
    """A run of model ``name`` in ``project`` as the trainer starts it: two epochs and a console line, still
    running; returns the model's id."""
    started = webhook(web_server, user, "training_started", {
        "epochs": epochs, "trainArgs": {"model": "yolo11n.yaml", "epochs": str(epochs), **args}},
        project=f"{user.username}/{project}", name=name)
    for epoch in range(2):
        webhook(web_server, user, "epoch_end", {"epoch": epoch, "metrics": {
            **METRICS, "metrics/mAP50-95(B)": (0.2, 0.3)[epoch] + gain, "train/box_loss": 1.5 - gain - 0.2 * epoch},
            "system": {"cpu": 35.0, "ram": 12.5}},
            modelId=started["modelId"])
    webhook(web_server, user, "console_output", {"chunkId": 1, "content": "Epoch 2/5 box_loss 1.5\n",
                                                  "lineCount": 1}, modelId=started["modelId"])
    return started["modelId"]
