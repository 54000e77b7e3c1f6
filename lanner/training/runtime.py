"""The training engine of one server process: the webhook group-commit writer, the executor runs are placed
on, and the supervisor that dispatches, watches, meters and settles them.

``create_app`` builds it next to the request context and starts and stops it in the app's lifespan. Nothing a
request depends on at the ground floor (``lanner.context``) knows it exists; training routes reach it through
``lanner.training.dependencies.Runtime``."""

from __future__ import annotations

import logging
import threading

from lanner.context import AppContext
from lanner.gpus.catalogue import get_catalogue
from lanner.training import estimates
from lanner.training.executors import Executor, make_executor
from lanner.training.group_commit import GroupCommitWriter
from lanner.training.supervisor import Supervisor

log = logging.getLogger("lanner.training")


class TrainingRuntime:
    def __init__(self, ctx: AppContext, executor: Executor | None = None, *, prepare_estimates: bool = False) -> None:
        self.ctx = ctx
        self.prepare_estimates = prepare_estimates
        self.estimates_ready = threading.Event()  # set once the start-up estimate is done (or failed)
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
        if self.prepare_estimates and self.ctx.settings.prepare_estimates:
            threading.Thread(target=self._prepare_estimates, name="lanner-estimate-warm-up", daemon=True).start()

    def _prepare_estimates(self) -> None:
        """The cold first estimate (estimates.warm_up), off the request path: training.start's first call
        would otherwise pay it."""
        try:
            estimates.warm_up(self.ctx.db, get_catalogue(self.ctx.settings), self.ctx.settings.resolved_home)
        except Exception:  # the first request will pay it then, and say what is wrong
            log.exception("could not prepare the first estimate")
        finally:
            self.estimates_ready.set()

    def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.stop()
        self.writer.stop()
