"""Where a new model starts (``lanner.projects.starting``): a run that names no model fine-tunes the best
pretrained start this server has for the dataset's task (official weights first: newest family, smallest size;
then the starting points the operator offers, such as the demo's), and only a server with none trains from a YAML."""

from __future__ import annotations

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.projects import official, starting
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord
from tests.training.conftest import ARGS, new_model
from tests.training.test_start_api import credit

NO_MODEL = {key: value for key, value in ARGS.items() if key != "model"}


def _principal(session, account) -> Principal:
    return Principal.of(session.get(User, account.user_id))


def _started_from(shapes, name: str) -> str:
    shapes.training.start(model_id=new_model(shapes, name), gpu_type="cpu", train_args=NO_MODEL)
    return shapes.models.retrieve("alice", "p", name)["model"]["trainArgs"]["model"]


def test_a_run_naming_no_model_fine_tunes_the_best_official_start(shapes, app, alice, fake_executor, tiny_weights):
    ctx = app.state.lanner
    credit(app, alice, 10_000_000)
    assert _started_from(shapes, "bare") == "yolo11n.yaml"  # nothing pretrained here: random weights, as before
    for name in ("yolov8n", "yolo11s", "yolo11n", "yolo11m"):
        official.install_file(ctx.db, ctx.blobs, tiny_weights, name=name)
    assert _started_from(shapes, "official") == "ul://ultralytics/yolo11/yolo11n"  # newest family, smallest size
    with ctx.db.session() as session:
        names = [start.name for start in starting.choices(session, _principal(session, alice), "detect")]
        assert names == ["yolo11n", "yolo11s", "yolo11m", "yolov8n"]
        assert starting.best(session, _principal(session, alice), "segment") is None  # no start of another task


def test_an_offered_starting_point_is_chosen_once_trained_and_only_where_readable(shapes, app, alice, bob,
                                                                                  fake_executor, tiny_weights):
    ctx = app.state.lanner
    credit(app, alice, 10_000_000)
    with ctx.db.session() as session:  # the demo's way: bob's model offered while it still trains
        project = projects_service.get_or_create_project(session, owner_id=bob.user_id, slug="starter")
        model = projects_service.create_model(session, project, name="shapes-base", task="detect")
        starting.offer(session, model, note="pretrained on shapes")
        model_id = model.id
    with ctx.db.session() as session:
        assert starting.choices(session, _principal(session, alice), "detect") == []  # bob's project is private
        session.get(ModelRecord, model_id).project.visibility = "public"
    with ctx.db.session() as session:
        [training] = starting.choices(session, _principal(session, alice), "detect")
        assert not training.ready and starting.best(session, _principal(session, alice), "detect") is None
    assert _started_from(shapes, "while-training") == "yolo11n.yaml"

    with ctx.db.session() as session:  # its run completed with weights: now it is the start
        model = session.get(ModelRecord, model_id)
        model.weights_sha256, model.status, model.train_args = "0" * 64, "completed", {"model": "yolo11n.yaml"}
    assert _started_from(shapes, "from-offered") == "ul://bob/starter/shapes-base"
    official.install_file(ctx.db, ctx.blobs, tiny_weights, name="yolo11n")
    assert _started_from(shapes, "from-official") == "ul://ultralytics/yolo11/yolo11n"  # official weights first
