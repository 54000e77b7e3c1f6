"""What an executor runs for one export attempt: ``python -m lanner.exports.worker``.

Everything comes from the environment the queue built (``exports.queue``): ``LANNER_EXPORT_SPEC`` (JSON:
``exportId, format, args, device, stem, filename, weightsUrl, weightsSha256, uploadUrl``). The worker downloads
the weights from their signed link (checked against their hash), runs ``YOLO(weights).export(format=...)`` in a
scratch folder (``lanner.scratch``), packs a folder artefact as a zip and PUTs it to the attempt's upload slot:
Lanner's signed route, where the server marks the export completed when those bytes arrive, or, with blobs in a
bucket, a presigned URL into the bucket's staging area (the bytes never pass through an API host), which the
server settles once it sees this worker exit. It needs no database and no key, so it runs the same on a Ray
node.

On failure it prints ``ERROR_MARK`` and a JSON ``{"message": ...}`` as its last line and exits 3: the queue reads
the message from the log tail and keeps it on the export. The environment is clean (``YOLO_OFFLINE=1``: the
exporter never tries to pip-install; the venv's ``bin`` first on ``PATH`` and ``PIP_NO_INDEX=1``, because MNN runs
``pip install`` through ``os.system`` on import)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from lanner.scratch import scratch_folder

SPEC_ENV = "LANNER_EXPORT_SPEC"
ERROR_MARK = "LANNER_EXPORT_ERROR "
EXIT_FAILED = 3
UPLOAD_RETRY_SECONDS = 180.0  # rides over a server restart: the links still work when it comes back


class ExportFailed(Exception):
    """A reason for the user; the worker exits with it."""


def with_retries(what: str, attempt: Any) -> Any:
    """Run ``attempt()`` until it succeeds, riding over a server that is away (restarting, or killed and started
    again) for ``UPLOAD_RETRY_SECONDS``: the signed links stay valid across a restart. A 4xx answer is final."""
    deadline = time.monotonic() + UPLOAD_RETRY_SECONDS
    delay = 1.0
    while True:
        try:
            return attempt()
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise
            reason = f"HTTP {exc.code}"
        except OSError as exc:
            reason = str(exc)
        if time.monotonic() > deadline:
            raise ExportFailed(f"{what}: {reason}")
        print(f"lanner export: {what} ({reason}); retrying", flush=True)
        time.sleep(delay)
        delay = min(delay * 2, 15.0)


def download(url: str, target: Path, sha256: str | None = None) -> None:
    """Fetch the weights whole. ``http.client`` ends a body cut short (the server killed mid-answer) as if it were
    complete, so the bytes are checked against the content address (or at least the announced length), and a
    short copy is fetched again like any other interruption."""
    def attempt() -> None:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=120) as response, target.open("wb") as out:
            while chunk := response.read(1 << 20):
                out.write(chunk)
                digest.update(chunk)
            missing = getattr(response, "length", None)
        if missing:
            raise ConnectionError(f"the answer ended {missing} bytes short")
        if sha256 and digest.hexdigest() != sha256:
            raise ConnectionError(f"the bytes received hash to {digest.hexdigest()[:12]}…, not {sha256[:12]}…")

    try:
        with_retries("the model's weights could not be fetched", attempt)
    except urllib.error.HTTPError as exc:
        raise ExportFailed(f"the model's weights could not be fetched (HTTP {exc.code}); were they replaced or "
                           "deleted?") from None


def export(spec: dict[str, Any], weights: Path) -> Path:
    # ultralytics (and torch) take seconds to import: only once the weights are here
    from ultralytics import YOLO

    args = dict(spec.get("args") or {})
    try:
        output = YOLO(str(weights)).export(format=spec["format"], device=spec.get("device") or "cpu", **args)
    except Exception as exc:  # the exporter's own words: assertion, ValueError, a missing module
        message = str(exc).replace("ERROR ❌️", "").strip() or type(exc).__name__
        raise ExportFailed(f"{spec['format']} export failed: {type(exc).__name__}: {message}") from exc
    if not output:
        raise ExportFailed(f"{spec['format']} export produced nothing")
    return Path(output)


def pack(output: Path, folder: Path, filename: str) -> Path:
    """A folder artefact (``_openvino_model/``) as one zip, named for the download; a file as it is."""
    if not output.is_dir():
        return output
    archive = folder / filename
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for path in sorted(output.rglob("*")):
            if path.is_file():
                out.write(path, Path(output.name) / path.relative_to(output))
    return archive


def upload(path: Path, url: str) -> None:
    """PUT the artefact to its slot; a refused slot (the export was cancelled or deleted, a presigned URL that
    expired) is final, a server or bucket that is away (restarting) is tried again for a while."""
    def attempt() -> None:
        with path.open("rb") as body:
            request = urllib.request.Request(url, data=body, method="PUT", headers={
                "Content-Type": "application/octet-stream", "Content-Length": str(path.stat().st_size)})
            with urllib.request.urlopen(request, timeout=600):
                return

    try:
        with_retries("the exported file could not be uploaded", attempt)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:300]
        raise ExportFailed(f"the upload of the exported file was refused (HTTP {exc.code}: {detail})") from None


def run(spec: dict[str, Any], home: Path) -> int:
    started = time.monotonic()
    with scratch_folder(home, "export-") as folder:
        weights = folder / f"{spec['stem']}.pt"
        download(spec["weightsUrl"], weights, spec.get("weightsSha256"))
        output = export(spec, weights)
        artefact = pack(output, folder, spec["filename"])
        size = artefact.stat().st_size
        upload(artefact, spec["uploadUrl"])
    print(f"lanner export: {spec['exportId']} {spec['format']} done in {time.monotonic() - started:.1f} s, "
          f"{size} bytes", flush=True)
    return size


def main() -> None:
    raw = os.environ.get(SPEC_ENV)
    if not raw:
        sys.exit(f"lanner export worker: {SPEC_ENV} is not set")
    spec = json.loads(raw)
    home = Path(os.path.expanduser(os.environ.get("LANNER_WORKER_DIR") or os.environ.get("LANNER_HOME") or "."))
    home.mkdir(parents=True, exist_ok=True)
    print(f"lanner export: {spec['exportId']} attempt {spec.get('attempt')}: {spec['format']} {spec.get('args')}",
          flush=True)
    try:
        run(spec, home)
    except ExportFailed as exc:
        print(ERROR_MARK + json.dumps({"message": str(exc)}), flush=True)
        sys.exit(EXIT_FAILED)


def error_from_log(tail: str) -> str | None:
    """The message a failed worker printed last (see ``main``), or None."""
    for line in reversed(tail.splitlines()):
        if ERROR_MARK in line:
            try:
                return str(json.loads(line.split(ERROR_MARK, 1)[1])["message"])
            except (ValueError, KeyError, TypeError):
                return None
    return None


if __name__ == "__main__":
    main()
