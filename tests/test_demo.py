"""``lanner demo``'s starting model: queued once through the normal queue (a pending run of yolo11n on the
one-class pretraining data, which stays out of the user's lists), offered as a starting point, never queued again
while it is ready or on its way; a server with official detection weights gets none."""

from __future__ import annotations

from sqlalchemy import select

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.cli import demo
from lanner.datasets import service as datasets_service
from lanner.projects import official, starting
from lanner.projects.models import ModelRecord
from lanner.training.models import Run


def test_the_demo_queues_its_starting_model_once(app, fake_executor):
    ctx = app.state.lanner
    first = demo.ensure_workspace(ctx, username="carol", password="carol-password-1")
    assert first.starting_model == "ul://carol/starter/shapes-base" and first.starting_problem is None
    again = demo.ensure_workspace(ctx, username="carol", password="carol-password-2")
    assert again.starting_model is None  # on its way already
    with ctx.db.session() as session:
        [run] = session.scalars(select(Run))
        assert run.status == "pending" and run.gpu_type == "cpu"
        assert run.train_args["model"] == "yolo11n.yaml"
        assert run.train_args["data"] == "ul://carol/datasets/shapes-pretraining"
        model = session.get(ModelRecord, run.model_id)
        carol = Principal.of(session.get(User, model.owner_id))
        [offered] = starting.choices(session, carol, "detect")
        assert (offered.name, offered.ready) == ("shapes-base", False)
        listed = [d.slug for d in datasets_service.list_datasets(session, carol, owner="carol")]
        assert listed == ["shapes"]  # the pretraining data is reached from the model, not listed


def test_a_server_with_official_weights_needs_no_demo_starting_model(app, fake_executor, tiny_weights):
    ctx = app.state.lanner
    official.install_file(ctx.db, ctx.blobs, tiny_weights, name="yolo11n")
    workspace = demo.ensure_workspace(ctx, username="dave", password="dave-password-1")
    assert workspace.starting_model is None and workspace.images_added == 32
    with ctx.db.session() as session:
        assert session.scalars(select(Run)).all() == []
