"""The one way bytes leave Lanner: a signed GET on the blob route (``storage.signing.download_url``), answered
only with its signature, before it expires, and only for bytes a row still refers to (``storage.references``):
a blob the collector is about to delete, or one nobody stored, is a 404 whoever signed for it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from fastapi.testclient import TestClient

from lanner.datasets.models import ImageBlob
from lanner.storage.references import is_referenced, referenced_among


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def test_a_signed_link_serves_referenced_bytes_only(app: Any, client: TestClient) -> None:
    ctx = app.state.lanner
    kept, loose = ctx.blobs.put_bytes(b"\xff\xd8 kept image"), ctx.blobs.put_bytes(b"\xff\xd8 loose image")
    with ctx.db.session() as session:
        session.add(ImageBlob(sha256=kept.sha256, size=kept.size, width=1, height=1, format="jpeg", phash=0))
    with ctx.db.session() as session:
        assert is_referenced(session, kept.sha256) and not is_referenced(session, loose.sha256)
        assert referenced_among(session, [kept.sha256, loose.sha256]) == {kept.sha256}

    served = client.get(_path(ctx.signer.download_url(kept.sha256, "kept.jpg")))
    assert served.status_code == 200 and served.content == b"\xff\xd8 kept image"
    assert "kept.jpg" in served.headers.get("content-disposition", "")
    unreferenced = client.get(_path(ctx.signer.download_url(loose.sha256, "loose.jpg")))
    assert unreferenced.status_code == 404 and unreferenced.json()["error"] == "file not found"


def test_a_link_without_its_signature_or_past_its_expiry_is_refused(app: Any, client: TestClient) -> None:
    ctx = app.state.lanner
    blob = ctx.blobs.put_bytes(b"\xff\xd8 image")
    with ctx.db.session() as session:
        session.add(ImageBlob(sha256=blob.sha256, size=blob.size, width=1, height=1, format="jpeg", phash=0))
    good = _path(ctx.signer.download_url(blob.sha256, "a.jpg"))
    assert client.get(good).status_code == 200
    unsigned = good.split("?", 1)[0]
    assert client.get(unsigned).status_code in (401, 403)
    renamed = good.replace("/a.jpg?", "/b.jpg?")  # the name is part of what was signed
    assert client.get(renamed).status_code in (401, 403)
    expired = _path(ctx.signer.download_url(blob.sha256, "a.jpg", ttl_seconds=-60))
    refused = client.get(expired)
    assert refused.status_code in (401, 403) and "error" in refused.json()
