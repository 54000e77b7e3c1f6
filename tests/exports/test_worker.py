"""The export worker rides over a server that is away (killed and started again mid-export) both when it fetches
the weights and when it delivers the file; a refusal (4xx) is final and says why."""

from __future__ import annotations

import hashlib
import io
import socket
import threading
import urllib.error
from pathlib import Path

import pytest

from lanner.exports import worker


class FlakyServer:
    """Stands in for ``urllib.request.urlopen``: refuses the connection ``down`` times, then answers."""

    def __init__(self, down: int, answer: bytes = b"weights", status: int | None = None) -> None:
        self.down, self.answer, self.status, self.calls = down, answer, status, 0

    def __call__(self, request, timeout=None):
        self.calls += 1
        if self.calls <= self.down:
            raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
        if self.status:
            raise urllib.error.HTTPError("http://x", self.status, "refused", {}, io.BytesIO(b'{"error": "gone"}'))
        return io.BytesIO(self.answer)


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(worker.time, "sleep", lambda s: None)


def test_the_weights_are_fetched_once_the_server_is_back(monkeypatch, tmp_path: Path) -> None:
    server = FlakyServer(down=3)
    monkeypatch.setattr(worker.urllib.request, "urlopen", server)
    worker.download("http://lanner/weights", tmp_path / "w.pt")
    assert (tmp_path / "w.pt").read_bytes() == b"weights" and server.calls == 4


def test_the_file_is_delivered_once_the_server_is_back(monkeypatch, tmp_path: Path) -> None:
    server = FlakyServer(down=2, answer=b"")
    monkeypatch.setattr(worker.urllib.request, "urlopen", server)
    artefact = tmp_path / "m.onnx"
    artefact.write_bytes(b"onnx")
    worker.upload(artefact, "http://lanner/slot")
    assert server.calls == 3


def test_a_refusal_is_final_and_a_server_that_never_returns_is_given_up(monkeypatch, tmp_path: Path) -> None:
    refused = FlakyServer(down=1, status=404)
    monkeypatch.setattr(worker.urllib.request, "urlopen", refused)
    with pytest.raises(worker.ExportFailed, match=r"HTTP 404\); were they replaced"):
        worker.download("http://lanner/weights", tmp_path / "w.pt")
    assert refused.calls == 2

    clock = iter(range(0, 10_000, 60))
    monkeypatch.setattr(worker.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(worker.urllib.request, "urlopen", FlakyServer(down=10**6))
    artefact = tmp_path / "m.onnx"
    artefact.write_bytes(b"onnx")
    with pytest.raises(worker.ExportFailed, match="could not be uploaded: .*Connection refused"):
        worker.upload(artefact, "http://lanner/slot")


class CutShortServer:
    """A real HTTP server whose first answer announces the whole file and then dies half-way through it (what a
    worker sees from a server killed mid-answer); later answers are whole."""

    def __init__(self, body: bytes) -> None:
        self.body, self.answers = body, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/weights"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with client:
                client.recv(65536)
                self.answers += 1
                sent = self.body if self.answers > 1 else self.body[:len(self.body) // 2]
                client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                               % (len(self.body), sent))


def test_weights_cut_short_by_a_dying_server_are_fetched_again_whole(tmp_path: Path) -> None:
    body = bytes(range(256)) * 4096
    server = CutShortServer(body)
    try:
        worker.download(server.url, tmp_path / "w.pt", hashlib.sha256(body).hexdigest())
    finally:
        server.listener.close()
    assert (tmp_path / "w.pt").read_bytes() == body and server.answers == 2


def test_bytes_that_do_not_hash_to_the_weights_address_are_not_exported(monkeypatch, tmp_path: Path) -> None:
    clock = iter(range(0, 10_000, 60))
    monkeypatch.setattr(worker.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(worker.urllib.request, "urlopen", FlakyServer(down=0, answer=b"other bytes"))
    with pytest.raises(worker.ExportFailed, match="could not be fetched: the bytes received hash to"):
        worker.download("http://lanner/weights", tmp_path / "w.pt", hashlib.sha256(b"weights").hexdigest())
