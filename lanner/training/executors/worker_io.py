"""The I/O every job worker does (``exports.worker``, ``autolabel.worker``, ``embeddings.worker``): those run
under an executor (a local subprocess, a Ray node) with no database and no key, and reach the server only through
the signed links in their spec. One module, because they must all ride over a server that is away (restarting,
or killed and started again) the same way, check the weights they fetch the same way, and report a failure in
the one form the queue reads back from the log tail (``error_from_log``).

Only the standard library: the server imports the workers' modules (for their ``SPEC_ENV``) and must not pay for
torch or ultralytics."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_FAILED = 3
RETRY_SECONDS = 180.0  # rides over a server restart: the signed links still work when it comes back


class WorkerFailed(Exception):
    """A reason for the user; the worker prints it after its error mark and exits ``EXIT_FAILED``."""


def with_retries(what: str, attempt: Callable[[], Any], *, refuse: bool = False) -> Any:
    """Run ``attempt()`` until it succeeds, riding over a server that is away for ``RETRY_SECONDS``: the signed
    links stay valid across a restart. A 4xx answer is final: re-raised as it is for the caller to word, or with
    ``refuse`` as a ``WorkerFailed`` that quotes the server's answer."""
    deadline = time.monotonic() + RETRY_SECONDS
    delay = 1.0
    while True:
        try:
            return attempt()
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                if refuse:
                    raise WorkerFailed(f"{what}: HTTP {exc.code} {exc.read().decode('utf-8', 'replace')[:300]}") \
                        from None
                raise
            reason = f"HTTP {exc.code}"
        except OSError as exc:
            reason = str(exc)
        if time.monotonic() > deadline:
            raise WorkerFailed(f"{what}: {reason}")
        print(f"lanner worker: {what} ({reason}); retrying", flush=True)
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
        raise WorkerFailed(f"the model's weights could not be fetched (HTTP {exc.code}); were they replaced or "
                           "deleted?") from None


def put(body: Path | bytes, url: str, *, what: str, timeout: float, refuse: bool = False) -> None:
    """PUT a file or bytes to a signed (or presigned) link, tried again while the server or bucket is away; a 4xx
    answer (a slot closed, a link expired) is final, as ``with_retries`` says."""
    size = len(body) if isinstance(body, bytes) else body.stat().st_size

    def attempt() -> None:
        with body.open("rb") if isinstance(body, Path) else io.BytesIO(body) as data:
            request = urllib.request.Request(url, data=data, method="PUT", headers={
                "Content-Type": "application/octet-stream", "Content-Length": str(size)})
            with urllib.request.urlopen(request, timeout=timeout):
                return

    with_retries(what, attempt, refuse=refuse)


def main(spec_env: str, mark: str, run: Callable[[dict[str, Any], Path], Any],
         describe: Callable[[dict[str, Any]], str]) -> None:
    """A worker's entry point: its spec from ``spec_env``, its scratch home from the executor's environment;
    a ``WorkerFailed`` is printed after ``mark`` as JSON (the last line, read back by ``error_from_log``)."""
    raw = os.environ.get(spec_env)
    if not raw:
        sys.exit(f"lanner worker: {spec_env} is not set")
    spec = json.loads(raw)
    home = Path(os.path.expanduser(os.environ.get("LANNER_WORKER_DIR") or os.environ.get("LANNER_HOME") or "."))
    home.mkdir(parents=True, exist_ok=True)
    print(describe(spec), flush=True)
    try:
        run(spec, home)
    except WorkerFailed as exc:
        print(mark + json.dumps({"message": str(exc)}), flush=True)
        sys.exit(EXIT_FAILED)


def error_from_log(tail: str, mark: str) -> str | None:
    """The message a failed worker printed last after ``mark`` (see ``main``), or None."""
    for line in reversed(tail.splitlines()):
        if mark in line:
            try:
                return str(json.loads(line.split(mark, 1)[1])["message"])
            except (ValueError, KeyError, TypeError):
                return None
    return None
