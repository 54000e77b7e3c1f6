"""The assistant's API and its round rules, with the fake executor: nothing trains; the supervisor and the
assistants' loop run by hand (``run_once``)."""

from __future__ import annotations

from typing import Any

import pytest

from lanner.training.executors import JobState
from tests.assistant.conftest import images, label, upload_unlabelled

A = "/api/datasets/alice/raw"
BOX = [{"classId": 0, "bbox": [0.5, 0.5, 0.2, 0.2]}]


@pytest.fixture
def raw(sdk: Any, alice: Any, client: Any, tmp_path: Any) -> dict[str, str]:
    upload_unlabelled(sdk(alice), client, tmp_path, train=10, val=2)
    return images(client, alice.headers, "alice", "raw")


def credit(app: Any, account: Any, micros: int) -> None:
    from lanner.billing import service as billing_service

    with app.state.lanner.db.session() as session:
        billing_service.top_up(session, user_id=account.user_id, micros=micros, description="test credit")


def label_some(client: Any, alice: Any, ids: dict[str, str], count: int, start: int = 0) -> None:
    for name in sorted(ids)[start:start + count]:
        label(client, alice.headers, ids[name], BOX)


def test_defaults_settings_and_validation(client, alice, raw):
    body = client.get(f"{A}/assistant", headers=alice.headers).json()
    assert body == {"enabled": False, "status": "off", "reason": None, "minLabels": 20, "every": 25,
                    "gpuType": "cpu", "epochs": 20, "imgsz": 320, "labelled": 0, "images": 12, "nextRoundAt": 12,
                    "model": None,
                    "rounds": []}
    for bad in ({"minLabels": 0}, {"every": -1}, {"epochs": 0}, {"imgsz": 16}, {"gpuType": ""}, {"colour": 1},
                {"enabled": "maybe"}):
        response = client.put(f"{A}/assistant", headers=alice.headers, json=bad)
        assert response.status_code == 422, (bad, response.text)
        assert isinstance(response.json()["error"], str)
    response = client.put(f"{A}/assistant", headers=alice.headers, json={"gpuType": "tpu-v9"})
    assert response.status_code == 422 and "gpuType" in response.json()["error"]
    # A type the plan does not allow is refused as the train dialog refuses it, and nothing is saved.
    response = client.put(f"{A}/assistant", headers=alice.headers, json={"gpuType": "h200-sxm", "epochs": 7})
    assert response.status_code == 403 and response.json()["code"] == "tier_required", response.text
    assert response.json()["requiredTier"] == "pro" and "gpuType" in response.json()["error"]
    assert client.get(f"{A}/assistant", headers=alice.headers).json()["epochs"] == 20
    saved = client.put(f"{A}/assistant", headers=alice.headers,
                       json={"enabled": True, "minLabels": 3, "every": 2, "epochs": 2, "imgsz": 64}).json()
    assert saved["enabled"] and saved["status"] == "waiting" and saved["minLabels"] == 3 and saved["imgsz"] == 64
    assert client.get(f"{A}/assistant", headers=alice.headers).json() == saved
    assert client.get(f"{A}/label-next", headers=alice.headers, params={"limit": 0}).status_code == 422
    nxt = client.get(f"{A}/label-next", headers=alice.headers, params={"limit": 5}).json()
    assert nxt["basis"] == "no assistant yet" and len(nxt["images"]) == 5
    assert [i["name"] for i in nxt["images"]] == sorted(raw)[:5] and all(i["score"] is None for i in nxt["images"])


def test_other_users_get_the_404_of_a_missing_dataset(client, alice, bob, raw):
    client.patch(f"{A}", headers=alice.headers, json={"visibility": "public"})  # readable, still not theirs
    missing = client.get("/api/datasets/alice/nothing/assistant", headers=bob.headers)
    assert missing.status_code == 404
    for method, path, kwargs in (("GET", f"{A}/assistant", {}), ("PUT", f"{A}/assistant", {"json": {"enabled": True}}),
                                 ("GET", f"{A}/label-next", {})):
        response = client.request(method, path, headers=bob.headers, **kwargs)
        assert response.status_code == 404, response.text
        assert response.json()["error"] == "dataset 'alice/raw' not found"
    assert client.get(f"{A}/assistant", headers=alice.headers).json()["enabled"] is False


def test_rounds_start_at_min_labels_then_every_n_never_twice_at_once(app, client, alice, raw, fake_executor):
    loop, supervisor = app.state.assistant, app.state.training.supervisor
    credit(app, alice, 10_000_000)
    client.put(f"{A}/assistant", headers=alice.headers, json={"enabled": True, "minLabels": 3, "every": 2,
                                                              "epochs": 2, "imgsz": 64})
    label_some(client, alice, raw, 2)
    loop.run_once()
    state = client.get(f"{A}/assistant", headers=alice.headers).json()
    assert state["status"] == "waiting" and state["labelled"] == 2 and state["rounds"] == []

    label_some(client, alice, raw, 1, start=2)
    loop.run_once()
    state = client.get(f"{A}/assistant", headers=alice.headers).json()
    assert state["status"] == "training" and state["nextRoundAt"] == 5
    (first,) = state["rounds"]
    assert first["round"] == 1 and first["labelled"] == 3 and first["modelRef"] == "alice/raw-assistant/round-1"
    model = client.get("/api/models/alice/raw-assistant/round-1", headers=alice.headers).json()["model"]
    assert model["trainArgs"]["model"] == "yolo11n.yaml" and model["trainArgs"]["epochs"] == 2
    assert model["trainArgs"]["data"] == "ul://alice/datasets/raw-assistant-data"
    # It trains on the labelled images only, some of them in val.
    data = client.get("/api/datasets/alice/raw-assistant-data", headers=alice.headers).json()["dataset"]
    assert data["imageCount"] == 3
    # Its working dataset and project are reached from the assistant, never listed among the person's own.
    listed = client.get("/api/datasets/alice", headers=alice.headers).json()["datasets"]
    assert [d["dataset"] for d in listed] == ["raw"]
    projects = client.get("/api/projects/alice", headers=alice.headers).json()["projects"]
    assert "raw-assistant" not in [p["project"] for p in projects]
    names = {i["name"]: i["split"] for i in client.get("/api/datasets/alice/raw-assistant-data/images",
                                                      headers=alice.headers).json()["images"]}
    assert set(names) == set(sorted(raw)[:3]) and "val" in names.values() and "train" in names.values()

    supervisor.run_once()
    assert len(fake_executor.launched) == 1
    label_some(client, alice, raw, 3, start=3)  # 6 labelled: due by count, but round 1 still trains
    loop.run_once()
    loop.run_once()
    assert len(client.get(f"{A}/assistant", headers=alice.headers).json()["rounds"]) == 1

    spec = fake_executor.launched[0]
    worker = {"Authorization": f"Bearer {spec.env['ULTRALYTICS_API_KEY']}"}
    failed = client.post("/api/webhooks/training/metrics", headers=worker, json={
        "event": "training_failed", "modelId": model["id"], "data": {"error": "CUDA out of memory"}})
    assert failed.status_code == 200, failed.text
    fake_executor.set(run_id_of(spec), spec.attempt, JobState.FAILED, 1, "exited 1")
    supervisor.run_once()
    loop.run_once()  # sees the failure; 6 - 3 >= 2 labels since: round 2 starts in the same pass
    state = client.get(f"{A}/assistant", headers=alice.headers).json()
    assert state["rounds"][0]["status"] == "failed" and "CUDA out of memory" in state["rounds"][0]["reason"]
    assert [r["round"] for r in state["rounds"]] == [1, 2] and state["rounds"][1]["status"] == "training"
    assert state["rounds"][1]["labelled"] == 6


def run_id_of(spec: Any) -> int:
    return int(spec.run_id)


def test_a_round_that_cannot_start_fails_with_the_reason_and_retries_once_settings_are_saved(app, client, alice,
                                                                                            raw, fake_executor):
    loop = app.state.assistant
    client.put(f"{A}/assistant", headers=alice.headers, json={"enabled": True, "minLabels": 3, "every": 50})
    label_some(client, alice, raw, 3)
    loop.run_once()  # no credit for the CPU's $0.50/h
    state = client.get(f"{A}/assistant", headers=alice.headers).json()
    assert state["status"] == "failed" and state["reason"].startswith("the round could not start:")
    assert "credit" in state["reason"].lower() or "balance" in state["reason"].lower(), state["reason"]
    assert state["rounds"][0]["modelRef"] is None
    loop.run_once()
    assert len(client.get(f"{A}/assistant", headers=alice.headers).json()["rounds"]) == 1  # no retry by itself
    credit(app, alice, 10_000_000)
    client.put(f"{A}/assistant", headers=alice.headers, json={"enabled": True})
    loop.run_once()
    state = client.get(f"{A}/assistant", headers=alice.headers).json()
    assert [r["status"] for r in state["rounds"]] == ["failed", "training"] and state["status"] == "training"


def test_label_next_puts_the_least_sure_first_then_what_was_not_scored(app, client, alice, raw):
    from lanner.assistant.models import SCORING, Assistant, AssistantRound, AssistantScore
    from lanner.assistant.rounds import store_scores

    client.put(f"{A}/assistant", headers=alice.headers, json={"enabled": False})
    names = sorted(raw)
    label_some(client, alice, raw, 1)  # names[0] is labelled: never offered, even though it has a score
    keys = {n: raw[n].rsplit("-", 1)[1] for n in names}
    scores = {keys[names[0]]: 0.99, keys[names[1]]: 0.2, keys[names[2]]: 0.9, keys[names[3]]: 0.5}
    with app.state.lanner.db.session() as session:
        assistant = session.query(Assistant).one()
        entry = AssistantRound(assistant_id=assistant.id, round=1, labelled=1, status=SCORING)
        session.add(entry)
        session.flush()
        store_scores(session, assistant, entry, scores)
        assert session.query(AssistantScore).count() == 4
    body = client.get(f"{A}/label-next", headers=alice.headers, params={"limit": 5}).json()
    assert body["basis"] == "assistant round 1"
    assert [(i["name"], i["score"]) for i in body["images"]] == [
        (names[2], 0.9), (names[3], 0.5), (names[1], 0.2), (names[4], None), (names[5], None)]


def _round_events(session: Any) -> list[tuple[str | None, str, str | None]]:
    from sqlalchemy import select

    from lanner.status import StatusEvent

    return [(e.from_status, e.to_status, e.reason) for e in session.scalars(
        select(StatusEvent).where(StatusEvent.entity == "assistant_rounds").order_by(StatusEvent.id))]


def test_a_round_changes_status_through_the_one_path_with_an_event(app, client, alice, raw, fake_executor):
    from lanner.assistant import rounds
    from lanner.assistant.models import FAILED, SCORING, Assistant, AssistantRound, AssistantScore

    client.put(f"{A}/assistant", headers=alice.headers, json={"enabled": True, "minLabels": 3, "every": 50})
    label_some(client, alice, raw, 3)
    app.state.assistant.run_once()  # no credit: round 1 is created, then fails to start
    with app.state.lanner.db.session() as session:
        assistant = session.query(Assistant).one()
        (first,) = session.query(AssistantRound).all()
        assert first.status == FAILED and first.reason.startswith("the round could not start:")
        created, failed = _round_events(session)
        assert created == (None, "training", "3 labelled images")
        assert failed[:2] == ("training", "failed") and failed[2] == first.reason[:300]
        # A failed round is never completed: refused, nothing stored, no event.
        assert not rounds.store_scores(session, assistant, first, {"k": 0.5})
        assert first.status == FAILED and session.query(AssistantScore).count() == 0
        assert len(_round_events(session)) == 2
        scoring = AssistantRound(assistant_id=assistant.id, round=2, labelled=3, status=SCORING)
        session.add(scoring)
        session.flush()
        assert rounds.store_scores(session, assistant, scoring, {"k": 0.5})
        assert (scoring.status, scoring.scored, session.query(AssistantScore).count()) == ("completed", 1, 1)
        assert _round_events(session)[-1] == ("scoring", "completed", "unlabelled images scored: 1")


def test_the_loop_counts_a_dataset_again_only_once_it_changed(app, client, alice, raw, monkeypatch):
    from lanner.assistant import training_data
    from lanner.datasets import service as datasets_service

    client.put(f"{A}/assistant", headers=alice.headers, json={"enabled": True, "minLabels": 10, "every": 50})
    label_some(client, alice, raw, 1)
    loop = app.state.assistant
    loop.run_once()  # counts the dataset at its current revision (or finds the view's counts)
    counted: list[str] = []
    counts, labelled = datasets_service.counts, training_data._count_labelled
    monkeypatch.setattr(datasets_service, "counts", lambda *a: counted.append("images") or counts(*a))
    monkeypatch.setattr(training_data, "_count_labelled", lambda *a: counted.append("labelled") or labelled(*a))
    loop.run_once()
    loop.run_once()
    assert counted == []  # nothing changed: nothing counted again
    label_some(client, alice, raw, 1, start=1)
    loop.run_once()
    assert sorted(counted) == ["images", "labelled"]
    assert client.get(f"{A}/assistant", headers=alice.headers).json()["labelled"] == 2
