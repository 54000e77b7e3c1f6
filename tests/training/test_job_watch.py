"""The claim and the poll that the training supervisor and the export queue share
(``lanner.training.executors.watch.JobWatch``), on a table of its own: stale claims given back, statuses observed on
the row as it is now, unreadable statuses reported with since when, claims taken once."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from lanner.db import Database
from lanner.training.executors import JobState, JobStatus
from lanner.training.executors import watch as watch_module
from lanner.training.executors.watch import LAUNCHING, STALE_LAUNCH_SECONDS, JobWatch
from tests.training.fakes import FakeExecutor

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Base(DeclarativeBase):
    pass


class Job(Base):
    __tablename__ = "watched_jobs"

    id: Mapped[str] = mapped_column(String(8), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8), default="a")
    external_id: Mapped[str | None] = mapped_column(String(80))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class Unreadable(FakeExecutor):
    """A fake executor that cannot say how the jobs in ``broken`` are."""

    def __init__(self) -> None:
        super().__init__()
        self.broken: set[str] = set()
        self.asked: list[str] = []

    def status(self, external_id: str) -> JobStatus:
        self.asked.append(external_id)
        if external_id in self.broken:
            raise ConnectionError("the cluster forgot the job")
        return super().status(external_id)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(watch_module, "utcnow", clock)
    return clock


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = Database(f"sqlite:///{tmp_path / 'jobs.db'}")
    Base.metadata.create_all(database.engine)
    yield database
    database.engine.dispose()


def add(db: Database, **rows: str | None) -> None:
    with db.session() as session:
        session.add_all(Job(id=key, external_id=external_id) for key, external_id in rows.items())


def external_ids(db: Database) -> dict[str, str | None]:
    with db.session() as session:
        return {job.id: job.external_id for job in session.query(Job).order_by(Job.id)}


class Recorder:
    def __init__(self) -> None:
        self.observed: list[tuple[str, JobState]] = []
        self.released: list[tuple[str, str]] = []
        self.unreadable: list[tuple[str, str, datetime]] = []

    def observe(self, session: Any, job: Job, status: JobStatus) -> None:
        self.observed.append((job.id, status.state))

    def release(self, key: str, claim: str) -> None:
        self.released.append((key, claim))

    def silent(self, key: str, external_id: str, since: datetime) -> None:
        self.unreadable.append((key, external_id, since))

    def poll(self, jobs: JobWatch, executor: Any, **kwargs: Any) -> None:
        jobs.poll(executor, observe=self.observe, release_stale=self.release, unreadable=self.silent, **kwargs)


def test_a_claim_is_taken_once_and_only_where_allowed(db: Database, clock: Clock) -> None:
    add(db, a=None, b=None)
    jobs = JobWatch(db, Job, what="job", log=logging.getLogger("tests"))
    with db.session() as session:
        assert jobs.claim(session, "a")
        assert not jobs.claim(session, "a")  # claimed already: another pass launches it
        assert not jobs.claim(session, "b", Job.kind == "other")
    assert external_ids(db) == {"a": f"{LAUNCHING}{T0.isoformat()}", "b": None}


def test_a_stale_claim_is_given_back_and_a_fresh_one_left_alone(db: Database, clock: Clock) -> None:
    stale = f"{LAUNCHING}{(T0 - timedelta(seconds=STALE_LAUNCH_SECONDS + 1)).isoformat()}"
    fresh = f"{LAUNCHING}{(T0 - timedelta(seconds=STALE_LAUNCH_SECONDS - 1)).isoformat()}"
    add(db, a=stale, b=fresh, c=None)
    executor, seen = Unreadable(), Recorder()
    seen.poll(JobWatch(db, Job, what="job", log=logging.getLogger("tests")), executor)
    assert seen.released == [("a", stale)]
    assert executor.asked == [] and seen.observed == []  # a claim has no job to ask about; no row c is launched


def test_statuses_are_observed_on_the_row_as_it_is_now(db: Database, clock: Clock) -> None:
    add(db, a="job-a", b="job-b", c="job-c")
    executor, seen = Unreadable(), Recorder()
    executor.states.update({"job-a": JobStatus(JobState.RUNNING), "job-b": JobStatus(JobState.LOST),
                            "job-c": JobStatus(JobState.RUNNING)})
    relaunched = executor.status

    def status(external_id: str) -> JobStatus:  # job b is relaunched while its old worker's status is read
        if external_id == "job-b":
            with db.session() as session:
                session.get(Job, "b").external_id = "job-b2"
        return relaunched(external_id)

    executor.status = status  # type: ignore[method-assign]
    seen.poll(JobWatch(db, Job, what="job", log=logging.getLogger("tests")), executor, where=(Job.id != "c",))
    assert seen.observed == [("a", JobState.RUNNING)]  # b's answer was about a worker it no longer has; c: not asked


def test_an_unreadable_status_is_reported_with_since_when(db: Database, clock: Clock,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    add(db, a="job-a")
    executor, seen = Unreadable(), Recorder()
    executor.states["job-a"] = JobStatus(JobState.RUNNING)
    executor.broken.add("job-a")
    jobs = JobWatch(db, Job, what="job", log=logging.getLogger("tests"))
    seen.poll(jobs, executor)
    clock.now = T0 + timedelta(seconds=10)
    seen.poll(jobs, executor)
    assert seen.unreadable == [("a", "job-a", T0), ("a", "job-a", T0)]  # since the first failure
    assert caplog.text.count("could not poll job a (job-a)") == 1  # logged once, not at every pass
    executor.broken.clear()
    seen.poll(jobs, executor)  # readable again: the count starts over
    executor.broken.add("job-a")
    clock.now = T0 + timedelta(seconds=20)
    seen.poll(jobs, executor)
    assert seen.unreadable[-1] == ("a", "job-a", T0 + timedelta(seconds=20))
    jobs.forget("a")  # the domain settled it
    clock.now = T0 + timedelta(seconds=30)
    seen.poll(jobs, executor)
    assert seen.unreadable[-1] == ("a", "job-a", T0 + timedelta(seconds=30))
    with db.session() as session:  # no longer launched: forgotten, so a later attempt starts a fresh count
        session.get(Job, "a").external_id = None
    seen.poll(jobs, executor)
    with db.session() as session:
        session.get(Job, "a").external_id = "job-a"
    clock.now = T0 + timedelta(seconds=40)
    seen.poll(jobs, executor)
    assert seen.unreadable[-1] == ("a", "job-a", T0 + timedelta(seconds=40))
    assert seen.observed == [("a", JobState.RUNNING)]
