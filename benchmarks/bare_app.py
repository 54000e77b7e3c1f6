"""The baseline for benchmarks/webhook_ingest.py: a bare FastAPI app with the training-metrics webhook path that
parses the JSON body into Lanner's pydantic models as a plain FastAPI endpoint does (JSON into a dict, then the
envelope, then the ``epoch_end`` data) and stores nothing. No auth, no database. It stays the plain endpoint the
targets are set against: Lanner's own webhook parses in one pass since issue 19 (``lanner.http.direct_route``).

Served like ``lanner serve`` serves Lanner: one uvicorn process, log_level warning, no access log.

    .venv/bin/python benchmarks/bare_app.py --port 8766
"""

from __future__ import annotations

from typing import Any

from common import serve_main
from fastapi import FastAPI

from lanner.training.schemas import EpochEndData, MetricsEvent

app = FastAPI(title="bare webhook baseline")


@app.get("/api/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


# An async handler, like Lanner's (which hands the event to its writer thread and awaits the commit): no
# threadpool hop on either side, so the difference measured is the work.
@app.post("/api/webhooks/training/metrics")
async def training_metrics(body: MetricsEvent) -> dict[str, Any]:
    if body.event == "epoch_end":
        EpochEndData.model_validate(body.data)
    return {"received": True, "event": body.event, "modelId": body.modelId}


def main() -> None:
    serve_main(app, __doc__.splitlines()[0], 8766)


if __name__ == "__main__":
    main()
