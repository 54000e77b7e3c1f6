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

import time
import urllib.error
import zipfile
from pathlib import Path
from typing import Any

from lanner.scratch import scratch_folder
from lanner.training.executors import worker_io
from lanner.training.executors.worker_io import WorkerFailed as ExportFailed
from lanner.training.executors.worker_io import download

SPEC_ENV = "LANNER_EXPORT_SPEC"
ERROR_MARK = "LANNER_EXPORT_ERROR "


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
    try:
        worker_io.put(path, url, what="the exported file could not be uploaded", timeout=600)
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
    worker_io.main(SPEC_ENV, ERROR_MARK, run, lambda spec: f"lanner export: {spec['exportId']} attempt "
                   f"{spec.get('attempt')}: {spec['format']} {spec.get('args')}")


if __name__ == "__main__":
    main()
