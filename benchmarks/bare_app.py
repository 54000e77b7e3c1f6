"""The baseline for benchmarks/webhook_ingest.py: a bare FastAPI app with the training-metrics webhook path that
parses the JSON body into pydantic models (the same two-step parse Lanner does: the envelope, then the
``epoch_end`` data) and stores nothing. No auth, no database.

Served like ``lanner serve`` serves Lanner: one uvicorn process, log_level warning, no access log.

    .venv/bin/python benchmarks/bare_app.py --port 8766
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, workers=1, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
