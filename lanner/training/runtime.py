"""The training engine of one server process: the webhook group-commit writer, the executor runs are placed
on, and the supervisor that dispatches, watches, meters and settles them.

``create_app`` builds it next to the request context and starts and stops it in the app's lifespan. Nothing a
request depends on at the ground floor (``lanner.context``) knows it exists; training routes reach it through
``lanner.training.dependencies.Runtime``."""

from __future__ import annotations

from lanner.context import AppContext
from lanner.gpus.catalogue import get_catalogue
from lanner.training.executors import Executor, make_executor
from lanner.training.group_commit import GroupCommitWriter
from lanner.training.supervisor import Supervisor


class TrainingRuntime:
    def __init__(self, ctx: AppContext, executor: Executor | None = None) -> None:
        self.ctx = ctx
        self.writer = GroupCommitWriter(ctx.db, ctx.settings.public_url, get_catalogue(ctx.settings))
        self._executor = executor
        self._supervisor: Supervisor | None = None

    @property
    def executor(self) -> Executor:
        """Where runs execute (``LANNER_EXECUTOR``), built on first use (Ray is imported only when chosen)."""
        if self._executor is None:
            self._executor = make_executor(self.ctx.settings)
        return self._executor

    @property
    def supervisor(self) -> Supervisor:
        if self._supervisor is None:
            self._supervisor = Supervisor(self.ctx, self.executor)
        return self._supervisor

    def use_executor(self, executor: Executor) -> Supervisor:
        """Swap the executor (tests; a restarted server): the supervisor's memory goes with the old one."""
        if self._supervisor is not None:
            self._supervisor.stop()
        self._executor, self._supervisor = executor, None
        return self.supervisor

    def start(self) -> None:
        self.writer.start()
        if self.ctx.settings.supervisor_interval_seconds > 0:
            self.supervisor.start()

    def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.stop()
        self.writer.stop()
