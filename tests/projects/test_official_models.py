"""Official models (``ul://ultralytics/<family>/<name>``) and clones, through the official SDK.

The session's tiny trained detector (``tests.trained``) stands in for the official ``yolo11n``: registered with
``lanner models add-official`` or from ``LANNER_OFFICIAL_MODELS_DIR``, it must answer ``models.retrieve``
like any public model, be readable by everyone and writable by no one, and clone in O(1) (the weights blob
shared, not copied). Nothing is downloaded."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from sqlalchemy import select
from typer.testing import CliRunner
from ultralytics_platform import APIError

from lanner.accounts import passwords
from lanner.accounts import service as accounts_service
from lanner.accounts.models import User
from lanner.errors import BadRequest, Conflict, Forbidden
from lanner.projects import official
from lanner.projects.models import ModelRecord
from lanner.storage.references import referenced_among
from tests.sdk_types import assert_sdk_type
from tests.trained import attach_weights

OFFICIAL = ("ultralytics", "yolo11", "yolo11n")


def install(app: Any, weights: Path, name: str = "yolo11n") -> str:
    ctx = app.state.lanner
    return official.install_file(ctx.db, ctx.blobs, weights, name=name)


def weights_of(app: Any, model_id: str) -> str | None:
    with app.state.lanner.db.session() as session:
        return session.get(ModelRecord, model_id).weights_sha256


def status_of(call: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(APIError) as error:
        call()
    return error.value.status_code, str(error.value)


@pytest.fixture
def lanner_cli(app: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    from lanner.cli import app as cli_app
    from lanner.config import get_settings

    settings = app.state.lanner.settings
    monkeypatch.setenv("LANNER_HOME", str(settings.home))
    monkeypatch.setenv("LANNER_DATABASE_URL", settings.resolved_database_url)
    get_settings.cache_clear()
    yield lambda *args: CliRunner().invoke(cli_app, list(args))
    get_settings.cache_clear()


def test_add_official_serves_the_file_like_a_public_model_readable_by_all_writable_by_none(
        app, client, sdk, alice, bob, lanner_cli, tiny_weights, tmp_path):
    result = lanner_cli("models", "add-official", str(tiny_weights), "--name", "yolo11n")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "ul://ultralytics/yolo11/yolo11n"

    for account in (alice, bob):
        body = assert_sdk_type(sdk(account).models.retrieve(*OFFICIAL), "ModelsRetrieveResponseVariant1")
        model = body["model"]
        assert body["isOwner"] is False and model["visibility"] == "public" and model["status"] == "completed"
        assert model["task"] == "detect" and model["classNames"] == ["circle", "square"] and model["hasWeights"]
        assert model["baseModel"] == "yolo11n.yaml"
        files = sdk(account).models.files(*OFFICIAL)["files"]
        assert files[0]["name"] == "yolo11n.pt"
        assert client.get(files[0]["downloadUrl"]).content == tiny_weights.read_bytes()
    listed = sdk(bob).projects.list("ultralytics")["projects"]
    assert [(p["project"], p["name"], p["modelCount"]) for p in listed] == [("yolo11", "YOLO11", 1)]
    assert sdk(bob).account.profile(username="ultralytics")["user"]["username"] == "ultralytics"

    platform = sdk(alice)
    for call in (lambda: platform.models.update(*OFFICIAL, description="mine now"),
                 lambda: platform.models.delete(*OFFICIAL),
                 lambda: platform.projects.update("ultralytics", "yolo11", visibility="private"),
                 lambda: platform.projects.delete("ultralytics", "yolo11"),
                 lambda: platform.models.create(body={"owner": "ultralytics", "project": "yolo11", "model": "x"})):
        status, message = status_of(call)
        assert status == 403 and "official models are read-only" in message, message
    assert platform.models.retrieve(*OFFICIAL)["model"]["description"].startswith("Official Ultralytics")

    # Again under the same name: new weights; the old ones stay with whatever was cloned from them.
    clone = platform.models.clone(*OFFICIAL, project_body="mine")
    changed = tmp_path / "yolo11n.pt"
    checkpoint = torch.load(tiny_weights, map_location="cpu", weights_only=False)
    checkpoint["date"] = "changed"
    torch.save(checkpoint, changed)
    assert lanner_cli("models", "add-official", str(changed)).exit_code == 0  # the name comes from the file
    with app.state.lanner.db.session() as session:
        assert official.find(session, "yolo11", "yolo11n").weights_sha256 == official.file_digest(changed)
    assert weights_of(app, clone["id"]) == official.file_digest(tiny_weights)


def test_add_official_refuses_bad_names_and_files_in_one_line(lanner_cli, tiny_weights, tmp_path):
    for args, words in [((str(tiny_weights),), "'best.pt' is not an official model name"),
                        ((str(tiny_weights), "--name", "yolo9n"), "must start with one of yolo26, yolo11"),
                        ((str(tiny_weights), "--name", "YOLO11n"), "lowercase"),
                        ((str(tmp_path / "nope.pt"),), "is not a file")]:
        result = lanner_cli("models", "add-official", *args)
        assert result.exit_code == 1 and words in result.output and "Traceback" not in result.output, result.output
    junk = tmp_path / "yolo11s.pt"
    junk.write_bytes(b"not a checkpoint")
    result = lanner_cli("models", "add-official", str(junk))
    assert result.exit_code == 1 and "yolo11s.pt is not an Ultralytics checkpoint" in result.output, result.output


def test_add_official_by_name_downloads_only_where_online_and_says_what_to_do_offline(app, lanner_cli,
                                                                                     monkeypatch, tmp_path):
    """``lanner models add-official yolo11n`` uses the trainer's own downloader; offline (this machine, and
    ``YOLO_OFFLINE=1`` as the trainer reads it) it refuses in one line that names the file way instead."""
    monkeypatch.setenv("YOLO_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # no yolo11n.pt here: the name is a name, not a file
    result = lanner_cli("models", "add-official", "yolo11n")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "cannot download yolo11n.pt: this host is offline" in result.output
    assert "lanner models add-official ./yolo11n.pt" in result.output
    with app.state.lanner.db.session() as session:
        assert official.find(session, "yolo11", "yolo11n") is None


def test_a_missing_official_model_is_a_404_saying_how_to_add_it(app, sdk, alice, tiny_weights):
    platform = sdk(alice)
    status, message = status_of(lambda: platform.models.retrieve("ultralytics", "yolo11", "yolo11s"))
    assert status == 404 and "ask the operator to run `lanner models add-official yolo11s.pt`" in message
    install(app, tiny_weights)
    status, message = status_of(lambda: platform.models.retrieve("ultralytics", "yolo26", "yolo26n-seg"))
    assert status == 404 and "`lanner models add-official yolo26n-seg.pt`" in message
    status, message = status_of(lambda: platform.projects.retrieve("ultralytics", "yolov8"))
    assert status == 404 and "no official YOLOv8 models are installed" in message
    status, message = status_of(lambda: platform.models.retrieve("ultralytics", "yolo11", "resnet50"))
    assert status == 404 and "add-official" not in message  # not an official name: an ordinary 404
    status, message = status_of(lambda: platform.models.clone("ultralytics", "yolo11", "yolo11x",
                                                              project_body="p"))
    assert status == 404 and "add-official yolo11x.pt" in message


def test_nobody_can_register_sign_in_as_or_hold_keys_of_ultralytics(app, tiny_weights):
    with app.state.lanner.db.session() as session:
        with pytest.raises(BadRequest, match="reserved"):
            accounts_service.create_user(session, username="Ultralytics")
    install(app, tiny_weights)
    with app.state.lanner.db.session() as session:
        user = accounts_service.require_user(session, username="ultralytics")
        assert user.password_hash is None
        with pytest.raises(Forbidden):
            accounts_service.create_api_key(session, user=user)
        with pytest.raises(Forbidden):
            passwords.set_password(session, user=user, password="long enough password")


def test_a_persons_account_named_ultralytics_is_never_taken_over(app, tiny_weights):
    """A server whose user registered 'ultralytics' before the name was reserved: refused, not adopted."""
    with app.state.lanner.db.session() as session:
        session.add(User(username="ultralytics", full_name="someone", password_hash="x", tier="free"))
    with pytest.raises(Conflict, match="rename or delete it"):
        install(app, tiny_weights)


def test_clone_official_into_my_project_shares_the_weights_and_names_its_source(app, client, sdk, alice,
                                                                              tiny_weights):
    install(app, tiny_weights)
    platform = sdk(alice)
    first = assert_sdk_type(platform.models.clone(*OFFICIAL, owner_body="alice", project_body="cloud"),
                            "ModelsCloneResponse")
    assert (first["owner"], first["project"], first["model"], first["name"]) == ("alice", "cloud", "yolo11n",
                                                                                 "yolo11n")
    project = platform.projects.retrieve("alice", "cloud")["project"]
    assert project["visibility"] == "private"  # created for the clone
    second = platform.models.clone(*OFFICIAL, project_body="cloud")
    assert second["model"] == "yolo11n-2"
    named = platform.models.clone(*OFFICIAL, project_body="cloud", model_body="Base", name="My base",
                                  description="start here")
    assert (named["model"], named["name"]) == ("base", "My base")
    status, message = status_of(lambda: platform.models.clone(*OFFICIAL, project_body="cloud", model_body="base"))
    assert status == 409 and "already exists" in message

    body = assert_sdk_type(platform.models.retrieve("alice", "cloud", "yolo11n"), "ModelsRetrieveResponseVariant1")
    model = body["model"]
    assert body["isOwner"] and model["hasWeights"] and model["classNames"] == ["circle", "square"]
    assert model["status"] == "completed" and model["task"] == "detect" and model["metrics"]["fitness"] == 0.0
    assert model["sourceModel"] == {"owner": "ultralytics", "project": "yolo11", "projectName": "YOLO11",
                                    "model": "yolo11n", "modelName": "yolo11n"}
    source = platform.models.retrieve(*OFFICIAL)["model"]
    assert model["clonedFrom"] == model["sourceModelId"] == source["id"] and source["cloneCount"] == 3
    assert platform.models.retrieve("alice", "cloud", "base")["model"]["description"] == "start here"
    shared = {weights_of(app, m["id"]) for m in (first, second, named)}
    assert shared == {weights_of(app, source["id"])}  # one blob, referenced four times
    files = platform.models.files("alice", "cloud", "yolo11n")["files"]
    assert client.get(files[0]["downloadUrl"]).content == tiny_weights.read_bytes()
    # The clone is the caller's: it can change it; the official one is untouched.
    platform.models.update("alice", "cloud", "yolo11n", description="mine")
    assert platform.models.retrieve(*OFFICIAL)["model"]["description"].startswith("Official")


def test_clone_bad_targets_and_tenancy(app, sdk, alice, bob, tiny_weights):
    attach_weights(app, alice, tiny_weights, project="secret", model="tiny")
    platform, other = sdk(alice), sdk(bob)
    platform.models.create(body={"project": "secret", "model": "empty"})
    cases = [
        (lambda: other.models.clone("alice", "secret", "tiny", project_body="mine"), 404, "not found"),
        (lambda: other.models.clone("alice", "secret", "nope", project_body="mine"), 404, "not found"),
        (lambda: platform.models.clone("alice", "secret", "tiny", owner_body="bob", project_body="x"), 403,
         "your own workspace"),
        (lambda: platform.models.clone("alice", "secret", "tiny", owner_body="ultralytics", project_body="yolo11"),
         403, "your own workspace"),
        (lambda: platform.models.clone("alice", "secret", "tiny", project_body="bob/x"), 422, "is a path"),
        (lambda: platform.models.clone("alice", "secret", "tiny", project_body="!!!"), 422, "letter or digit"),
        (lambda: platform.models.clone("alice", "secret", "empty", project_body="x"), 409, "no weights"),
    ]
    for call, status, words in cases:
        got, message = status_of(call)
        assert got == status and words in message, (status, message)
    assert [p["project"] for p in other.projects.list("bob")["projects"]] == []  # nothing half-made

    platform.projects.update("alice", "secret", visibility="public")
    copy = other.models.clone("alice", "secret", "tiny", project_body="mine")
    assert (copy["owner"], copy["project"], copy["model"]) == ("bob", "mine", "tiny")
    platform.projects.update("alice", "secret", visibility="private")
    seen = other.models.retrieve("bob", "mine", "tiny")["model"]
    assert "sourceModel" not in seen and "clonedFrom" not in seen  # the original went private: not shown


def test_the_collector_keeps_weights_a_clone_still_uses(app, sdk, alice, tiny_weights):
    model_id = attach_weights(app, alice, tiny_weights, project="shapes", model="tiny")
    digest = weights_of(app, model_id)
    platform = sdk(alice)
    copy = platform.models.clone("alice", "shapes", "tiny", project_body="elsewhere")
    platform.models.delete("alice", "shapes", "tiny")
    with app.state.lanner.db.session() as session:
        assert referenced_among(session, [digest]) == {digest}
    assert platform.models.retrieve("alice", "elsewhere", "tiny")["model"]["hasWeights"]
    platform.models.delete("alice", "elsewhere", copy["model"])
    with app.state.lanner.db.session() as session:
        assert referenced_among(session, [digest]) == set()


def test_clone_project_copies_its_finished_models(app, sdk, alice, bob, tiny_weights):
    attach_weights(app, alice, tiny_weights, project="work", model="best")
    attach_weights(app, alice, tiny_weights, project="work", model="other")
    platform, other = sdk(alice), sdk(bob)
    platform.models.create(body={"project": "work", "model": "untrained"})
    status, _ = status_of(lambda: other.projects.clone("alice", "work"))
    assert status == 404
    platform.projects.update("alice", "work", visibility="public", description="shapes")

    copy = assert_sdk_type(other.projects.clone("alice", "work"), "ProjectsCloneResponse")
    assert (copy["owner"], copy["project"], copy["modelCount"]) == ("bob", "work", 2)
    project = other.projects.retrieve("bob", "work")
    assert project["project"]["visibility"] == "private" and project["project"]["description"] == "shapes"
    assert sorted(m["model"] for m in project["models"]) == ["best", "other"]
    assert project["project"]["clonedFrom"] == platform.projects.retrieve("alice", "work")["project"]["id"]
    assert platform.projects.retrieve("alice", "work")["project"]["cloneCount"] == 1

    again = other.projects.clone("alice", "work", models=["best"], name="Just best", visibility="public")
    assert (again["project"], again["name"], again["modelCount"]) == ("just-best", "Just best", 1)
    assert other.projects.clone("alice", "work", models=["best"])["project"] == "work-2"
    cases = [(lambda: other.projects.clone("alice", "work", project_body="work"), 409, "already exists"),
             (lambda: other.projects.clone("alice", "work", models=["nope"]), 422, "'nope' not in project"),
             (lambda: other.projects.clone("alice", "work", models=["untrained"]), 409, "no weights"),
             (lambda: other.projects.clone("alice", "work", owner_body="alice"), 403, "your own workspace")]
    for call, status, words in cases:
        got, message = status_of(call)
        assert got == status and words in message, (status, message)

    install(app, tiny_weights)
    install(app, tiny_weights, name="yolo11n-seg")  # any official name will do for the copy
    mine = other.projects.clone("ultralytics", "yolo11")
    assert (mine["project"], mine["modelCount"]) == ("yolo11", 2)
    assert other.projects.retrieve("bob", "yolo11")["project"]["visibility"] == "private"


def test_the_folder_registers_new_and_changed_files_once(app, sdk, alice, tiny_weights, tmp_path):
    folder = tmp_path / "official"
    folder.mkdir()
    shutil.copyfile(tiny_weights, folder / "yolo11n.pt")
    shutil.copyfile(tiny_weights, folder / "yolo26n.pt")
    (folder / "notes.pt").write_bytes(b"not an official name")
    (folder / "yolov8n.pt").write_bytes(b"not a checkpoint")
    ctx = app.state.lanner
    watcher = official.OfficialFolder(folder)
    assert watcher.sync(ctx.db, ctx.blobs) == ["ul://ultralytics/yolo11/yolo11n", "ul://ultralytics/yolo26/yolo26n"]
    assert watcher.sync(ctx.db, ctx.blobs) == []  # nothing changed: nothing read
    assert official.OfficialFolder(folder).sync(ctx.db, ctx.blobs) == []  # another process: same content
    platform = sdk(alice)
    assert platform.models.retrieve("ultralytics", "yolo26", "yolo26n")["model"]["classNames"] == ["circle", "square"]
    status, _ = status_of(lambda: platform.models.retrieve("ultralytics", "yolov8", "yolov8n"))
    assert status == 404

    checkpoint = torch.load(tiny_weights, map_location="cpu", weights_only=False)
    checkpoint["date"] = "a newer release"
    torch.save(checkpoint, folder / "yolo11n.pt")
    assert watcher.sync(ctx.db, ctx.blobs) == ["ul://ultralytics/yolo11/yolo11n"]
    with ctx.db.session() as session:
        record = official.find(session, "yolo11", "yolo11n")
        assert record.weights_sha256 == official.file_digest(folder / "yolo11n.pt")
        assert session.scalars(select(User.username).where(User.username == "ultralytics")).all() == ["ultralytics"]


def test_the_maintenance_pass_picks_up_the_folder(app, tiny_weights, tmp_path):
    folder = tmp_path / "official"
    folder.mkdir()
    app.state.maintenance.official = official.OfficialFolder(folder)
    assert app.state.maintenance.run_once().official_models == []
    shutil.copyfile(tiny_weights, folder / "yolov5nu.pt")
    assert app.state.maintenance.run_once().official_models == ["ul://ultralytics/yolov5/yolov5nu"]
