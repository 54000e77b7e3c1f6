"""A platform that stores nothing: the floor for benchmarks/streaming_overhead.py ``--stub``. It answers every
call the trainer's platform integration makes (``training_started`` and the other events, the checkpoint upload
slot, the upload PUT) at once with a canned answer, so a run streamed to it costs the trainer what streaming
costs the trainer, and nothing of a server's work. Served like ``lanner serve``: one uvicorn process, log level
warning, no access log.

    .venv/bin/python benchmarks/stub_platform.py --port 8767
"""

from __future__ import annotations

from typing import Any

from common import serve_main
from fastapi import FastAPI, Request

app = FastAPI(title="stub platform")


@app.get("/api/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/api/webhooks/training/metrics")
async def metrics(request: Request) -> dict[str, Any]:
    body = await request.json()
    answer: dict[str, Any] = {"received": True, "event": body.get("event"), "modelId": "stub", "runId": 1}
    if body.get("event") == "training_started":
        answer.update(mode="remote", modelSlug=body.get("name") or "train", modelUrl=f"{request.base_url}stub")
    return answer


@app.post("/api/webhooks/models/upload")
async def upload_slot(request: Request) -> dict[str, Any]:
    body = await request.json()
    path = f"stub/{body.get('filename', 'best.pt')}"
    return {"uploadUrl": f"{request.base_url}upload/{path}", "gcsPath": path, "uploadPath": path, "modelId": "stub"}


@app.put("/upload/{path:path}")
async def upload(path: str, request: Request) -> dict[str, int]:
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
    return {"size": size}


def main() -> None:
    serve_main(app, __doc__.splitlines()[0], 8767)


if __name__ == "__main__":
    main()
