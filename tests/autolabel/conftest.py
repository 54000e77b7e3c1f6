"""Auto-annotation tests: the in-process app's queue is off (``autolabel_poll_seconds=0``); a test drives it
pass by pass with a fake executor and runs the real worker code in-process, its HTTP going to the app through
the test client (``InProcessHTTP``). ``test_e2e_autolabel`` runs real workers against a real server."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.autolabel.worker import SPEC_ENV
from lanner.config import Settings
from lanner.datasets import service as datasets_service
from lanner.datasets.imports.ingest import commit_import, prepare_import
from lanner.synthetic import make_detection_dataset
from tests.conftest import GENEROUS_LIMITS, TEST_URL
from tests.trained import IMGSZ, tiny_weights  # noqa: F401  (a fixture)
from tests.training.fakes import FakeExecutor

PRICE = 0.013  # USD per image: not a round number of cents, so a charge that is off by one image shows


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL, secret_key="test-secret",
                    api_key_cache_seconds=0, autolabel_poll_seconds=0, export_poll_seconds=0,
                    supervisor_interval_seconds=0, maintenance_interval_seconds=0, assistant_poll_seconds=0,
                    autolabel_price_per_image=PRICE, autolabel_chunk_images=2, **GENEROUS_LIMITS)


def shapes_dataset(app: Any, tmp_path: Path, owner: str, *, slug: str = "shapes", images: int = 8,
                   unlabelled: int = 5) -> None:
    """``images`` synthetic shapes at the tiny detector's size, imported as ``owner`` would upload them, the
    label files of the first ``unlabelled`` (by name) removed."""
    ctx = app.state.lanner
    root = tmp_path / f"{owner}-{slug}"
    make_detection_dataset(root, train=images, val=0, size=IMGSZ, seed=3)
    for label in sorted((root / "labels" / "train").glob("*.txt"))[:unlabelled]:
        label.unlink()
    with prepare_import(blobs=ctx.blobs, settings=ctx.settings, source=root) as prepared, \
            ctx.db.session() as session:
        principal = Principal.of(accounts_service.require_user(session, username=owner))
        dataset = datasets_service.create_dataset(session, principal, name=slug, task="detect")
        dataset.class_names = ["circle", "square"]
        commit_import(session, prepared, dataset=dataset, queued=False)


def detector(app: Any, account: Any, weights: Path) -> str:
    """The tiny detector as ``account``'s model ``shapes/tiny``, with the image size it was trained at (what a
    finished run leaves in ``train_args``: the size auto-annotation predicts at)."""
    from lanner.projects.models import ModelRecord
    from tests.trained import attach_weights

    model_id = attach_weights(app, account, weights)
    with app.state.lanner.db.session() as session:
        session.get(ModelRecord, model_id).train_args = {"imgsz": IMGSZ}
    return model_id


class _Answer(io.BytesIO):
    def __init__(self, body: bytes) -> None:
        super().__init__(body)
        self.length = None  # what exports.worker.download checks: nothing left unread

    def __enter__(self) -> _Answer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class InProcessHTTP:
    """``urllib.request.urlopen`` for the worker, answered by the app through the test client: the worker's own
    code (fetching the weights and images, posting chunks, reading a 409) runs unchanged. ``after_post(n)`` is
    called after the n-th chunk the app accepted: a test raises there to kill the worker mid-batch."""

    def __init__(self, client: Any, after_post: Callable[[int], None] | None = None) -> None:
        self.client = client
        self.after_post = after_post
        self.posts = 0

    def __call__(self, request: Any, timeout: float = 0) -> _Answer:
        if isinstance(request, str):
            answer = self.client.get(request)
        else:
            answer = self.client.request(request.get_method(), request.full_url, content=request.data,
                                         headers=dict(request.header_items()))
        if answer.status_code >= 400:
            raise urllib.error.HTTPError(str(answer.url), answer.status_code, answer.text, {},  # type: ignore[arg-type]
                                         io.BytesIO(answer.content))
        if not isinstance(request, str) and request.get_method() == "POST":
            self.posts += 1
            if self.after_post:
                self.after_post(self.posts)
        return _Answer(answer.content)


def use_fake_executor(app: Any) -> FakeExecutor:
    executor = FakeExecutor()
    app.state.autolabel._executor = executor
    return executor


def launched_spec(executor: FakeExecutor, index: int = -1) -> dict[str, Any]:
    return dict(json.loads(executor.launched[index].env[SPEC_ENV]))


def run_worker(monkeypatch: pytest.MonkeyPatch, http: InProcessHTTP, spec: dict[str, Any], home: Path) -> None:
    from lanner.autolabel import worker

    monkeypatch.setattr(urllib.request, "urlopen", http)
    worker.run(spec, home)
