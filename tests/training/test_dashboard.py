"""The project page's runs table reads many models at once (``dashboard.model_rows``): its rows must be what the
per-model views say (``views.job_view``, ``curves``, ``billing.run_charged``), on SQLite and PostgreSQL, with the
same few queries however many models there are."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import event

from lanner.billing import service as billing
from lanner.db import utcnow
from lanner.gpus.catalogue import get_catalogue
from lanner.projects import service as projects_service
from lanner.training import dashboard, views
from lanner.training.service import latest_run
from lanner.training.state import RunStatus, create_run, transition
from lanner.training.writes import PendingWrites

BOX = "metrics/mAP50-95(B)"
MASK = "metrics/mAP50-95(M)"


def reference_row(session: Any, model: Any, catalogue: Any) -> dict[str, Any]:
    """The row as ``model_row`` built it one model at a time, before ``RunFacts``."""
    job = views.job_view(session, model, catalogue=catalogue) or {}
    run = latest_run(session, model.id)
    maps = [v for v in dashboard.curves(session, model.id)["map"] if v is not None]
    progress, timing = job.get("progress", {}), job.get("timing", {})
    charged, _ = dashboard._cost(session, run, 0.0)
    gpu = (job.get("compute") or {}).get("gpuDisplayName") or (run.device if run else None)
    return {"gpu": gpu or "", "epochs_done": int(progress.get("currentEpoch", 0)),
            "epochs_total": int(progress.get("totalEpochs", 0) or model.epochs or 0),
            "duration_s": round(timing.get("elapsedMs", 0.0) / 1000) if run else None, "cost_micros": charged,
            "best_map": max(maps) if maps else None}


def seed(session: Any, user_id: str) -> list[Any]:
    """Models covering what a row reads: no run, a finished run, a resumed model (two runs), a priced run still
    going, a GPU type the catalogue lacks, and box mAPs the database cannot hand over as a number."""
    project = projects_service.get_or_create_project(session, owner_id=user_id, slug="p")
    billing.top_up(session, user_id=user_id, micros=50_000_000)
    start = utcnow() - timedelta(hours=3)
    writes = PendingWrites()

    def model(name: str, epochs: int | None = 5) -> Any:
        record = projects_service.create_model(session, project, name=name)
        record.epochs = epochs
        return record

    def run(record: Any, **fields: Any) -> Any:
        made = create_run(session, record, status=RunStatus.STARTING, reason="training_started", **fields)
        transition(session, made, RunStatus.RUNNING, reason="first report")
        return made

    def epochs(record: Any, made: Any, values: list[dict[str, Any]], first: int = 0) -> None:
        for i, metrics in enumerate(values):
            writes.add_epoch(model_id=record.id, run_id=made.id, epoch=first + i, metrics=metrics, fitness=None,
                             best_fitness=None, system=None)
            writes.epochs[-1]["created_at"] = start + timedelta(minutes=first + i)

    models = [model("untrained", epochs=None)]
    done = model("done")
    finished = run(done, device="cuda:0", epochs=5)
    epochs(done, finished, [{BOX: 0.1 * (i + 1), "metrics/mAP50(B)": 0.2} for i in range(5)])
    transition(session, finished, RunStatus.COMPLETED, reason="training_complete")
    models.append(done)

    resumed = model("resumed", epochs=None)
    old = run(resumed, device="cpu", epochs=4)
    epochs(resumed, old, [{BOX: 0.31}, {BOX: 0.33}, {BOX: 0.35}])
    transition(session, old, RunStatus.FAILED, reason="training_failed")
    epochs(resumed, run(resumed, device="cpu"), [{BOX: 0.34}, {BOX: 0.36}], first=3)
    models.append(resumed)

    priced = model("priced", epochs=100)
    going = run(priced, executor="local", gpu_type="l4", epochs=100, price_micros_per_hour=390_000)
    epochs(priced, going, [{BOX: 0.2, MASK: 0.15}, {BOX: 0.25, MASK: 0.2}])
    billing.charge_run_to(session, user_id=user_id, run_id=going.id, target_micros=123_456)
    models.append(priced)

    unknown = model("unknown-gpu")
    run(unknown, gpu_type="mystery-gpu", device="cuda:1", epochs=5, price_micros_per_hour=0)
    models.append(unknown)

    odd = model("odd-values")  # a string, a null, a bool and no box key at all: read whole, as curves() does
    epochs(odd, run(odd, device="cpu", epochs=5), [{BOX: "0.42"}, {BOX: None, MASK: 0.3}, {BOX: True},
                                                   {MASK: 0.5}, {BOX: 1e-05}])
    models.append(odd)
    masks = model("masks-only")  # a model without a box mAP anywhere
    epochs(masks, run(masks, device="cpu", epochs=5), [{MASK: 0.11}, {MASK: 0.12}, {"metrics/mAP50(M)": 0.3}])
    models.append(masks)
    writes.flush(session)
    transition(session, latest_run(session, unknown.id), RunStatus.CANCELLED, reason="cancelled_by_user")
    session.flush()
    return models


def test_rows_of_many_models_are_the_per_model_views(app: Any, make_account: Any) -> None:
    alice = make_account("alice")
    catalogue = get_catalogue(app.state.lanner.settings)
    with app.state.lanner.db.session() as session:
        models = seed(session, alice.user_id)
        rows = dashboard.model_rows(session, models, catalogue=catalogue)
        assert [r["slug"] for r in rows] == [m.slug for m in models]
        for model, row in zip(models, rows, strict=True):
            expected = reference_row(session, model, catalogue)
            if model.status == RunStatus.RUNNING:  # still going: its duration grows while the test runs
                assert abs(row.pop("duration_s") - expected.pop("duration_s")) <= 1
            assert {k: row[k] for k in expected} == expected, model.slug
        by_slug = {r["slug"]: r for r in rows}
        assert by_slug["odd-values"]["best_map"] == 1.0  # true counts as 1.0, as _metric reads it
        assert by_slug["masks-only"]["best_map"] == 0.12
        assert by_slug["priced"]["cost_micros"] == 123_456
        assert by_slug["unknown-gpu"]["gpu"] == "mystery-gpu"


def test_the_runs_table_runs_the_same_queries_for_any_number_of_models(app: Any, make_account: Any) -> None:
    alice = make_account("alice")
    catalogue = get_catalogue(app.state.lanner.settings)
    statements: list[str] = []
    with app.state.lanner.db.session() as session:
        models = seed(session, alice.user_id)
        engine = session.get_bind()

        def count(*args: Any) -> None:
            statements.append(args[2])

        event.listen(engine, "before_cursor_execute", count)
        try:
            dashboard.model_rows(session, [models[1], models[3]], catalogue=catalogue)  # a priced run among them
            few = len(statements)
            statements.clear()
            dashboard.model_rows(session, models, catalogue=catalogue)
        finally:
            event.remove(engine, "before_cursor_execute", count)
    # Only the models whose box mAP is not a plain number are read one by one (two here).
    assert len(statements) <= few + 2, statements


def test_a_new_epoch_changes_what_the_table_remembers(app: Any, make_account: Any) -> None:
    alice = make_account("alice")
    catalogue = get_catalogue(app.state.lanner.settings)
    with app.state.lanner.db.session() as session:
        done = seed(session, alice.user_id)[1]
        assert dashboard.model_rows(session, [done], catalogue=catalogue)[0]["best_map"] == 0.5
        assert dashboard.model_rows(session, [done], catalogue=catalogue)[0]["best_map"] == 0.5  # remembered
        writes = PendingWrites()  # the webhook's own rows: the epoch, and the model's metrics and updated_at
        writes.add_epoch(model_id=done.id, run_id=latest_run(session, done.id).id, epoch=5, metrics={BOX: 0.9},
                         fitness=None, best_fitness=None, system=None)
        writes.flush(session)
        row = dashboard.model_rows(session, [done], catalogue=catalogue)[0]
        expected = reference_row(session, done, catalogue)
        assert (row["best_map"], row["epochs_done"]) == (0.9, 6) == (expected["best_map"], expected["epochs_done"])
