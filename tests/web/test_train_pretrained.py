"""The train dialog's starting point (``lanner.web.train_models``): the best pretrained start this server has for
the dataset's task is pre-selected under "Pretrained" (official weights first, then offered starting points such
as the demo's, which shows as on its way while it trains); random weights on a small dataset bring a warning that
says what to expect and what to pick instead; the image size starts at what the dataset's images need."""

from __future__ import annotations

from typing import Any

from lanner.projects import official, starting
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord
from tests.web.pages import soup, text
from tests.web.test_train_pages import DATASET, setup  # noqa: F401 (the fixture)

OFFICIAL_URI = "ul://ultralytics/yolo11/yolo11n"


def selected_model(page: Any) -> Any:
    return page.select_one("#field-model option[selected]")


def test_without_pretrained_weights_a_small_dataset_is_warned_and_told_the_command(client, setup):  # noqa: F811
    setup()
    page = soup(client.get("/train", params={"dataset": DATASET}))
    assert selected_model(page)["value"] == "yolo11n.yaml"
    assert "random weights" in selected_model(page).find_parent("optgroup")["label"]
    warning = text(page.select_one("#scratch-warning"))
    assert "random weights" in warning and "12 training images" in warning
    assert "lanner models add-official yolo11n.pt" in warning
    assert "lanner models add-official" in text(page.select_one("#field-model-hint"))
    # The images are 96 px: trained at 96, not the trainer's 640 (16 times the compute for nothing).
    assert page.select_one("#field-imgsz")["value"] == "96"
    assert page.select(".gpu-table tbody tr")


def test_installed_pretrained_weights_are_pre_selected_and_a_scratch_pick_is_warned(app, client, setup,  # noqa: F811
                                                                                    tiny_weights):
    setup()
    ctx = app.state.lanner
    for name in ("yolov8n", "yolo11n"):
        official.install_file(ctx.db, ctx.blobs, tiny_weights, name=name)
    page = soup(client.get("/train", params={"dataset": DATASET}))
    chosen = selected_model(page)
    assert chosen["value"] == OFFICIAL_URI and "Pretrained" in chosen.find_parent("optgroup")["label"]
    assert [o["value"] for o in chosen.find_parent("optgroup").select("option")] == [
        OFFICIAL_URI, "ul://ultralytics/yolov8/yolov8n"]
    assert not page.select_one("#scratch-warning")
    assert "Official weights, pretrained on COCO" in text(page.select_one("#field-model-hint"))
    assert page.select_one("#field-name")["value"] == "yolo11n"
    scratch = soup(client.get("/train", params={"dataset": DATASET, "model": "yolo11s.yaml"}))
    warning = text(scratch.select_one("#scratch-warning"))
    assert "yolo11s.yaml starts from random weights" in warning and "pick yolo11n" in warning


def test_the_demos_starting_model_is_on_its_way_then_pre_selected(app, client, setup, make_account):  # noqa: F811
    setup()
    bob = make_account("bob")
    ctx = app.state.lanner
    with ctx.db.session() as session:  # what `lanner demo` leaves: a public model offered while it trains
        project = projects_service.get_or_create_project(session, owner_id=bob.user_id, slug="starter")
        project.visibility = "public"
        model = projects_service.create_model(session, project, name="shapes-base", task="detect",
                                              status="running")
        starting.offer(session, model, note="Pretrained on this machine on 200 synthetic shapes")
        model_id = model.id
    page = soup(client.get("/train", params={"dataset": DATASET}))
    assert selected_model(page)["value"] == "yolo11n.yaml"  # nothing ready yet
    assert "shapes-base is still training" in text(page.select_one("#field-model-hint"))
    assert "shapes-base is still training" in text(page.select_one("#scratch-warning"))
    with ctx.db.session() as session:
        record = session.get(ModelRecord, model_id)
        record.weights_sha256, record.status, record.train_args = "0" * 64, "completed", {"model": "yolo11n.yaml"}
    page = soup(client.get("/train", params={"dataset": DATASET}))
    assert selected_model(page)["value"] == "ul://bob/starter/shapes-base"
    assert "Pretrained on this machine" in text(page.select_one("#field-model-hint"))
    assert not page.select_one("#scratch-warning")


def test_the_dialog_looks_the_pretrained_starts_up_once(client, setup, monkeypatch):  # noqa: F811
    setup()
    asked: list[str] = []
    real = starting.choices

    def counted(session: Any, principal: Any, task: str) -> list[starting.Start]:
        asked.append(task)
        return real(session, principal, task)

    monkeypatch.setattr(starting, "choices", counted)
    for params in ({"dataset": DATASET}, {"dataset": DATASET, "model": "yolo11s.yaml"}):
        asked.clear()
        assert client.get("/train", params=params).status_code == 200
        assert asked == ["detect"], params
