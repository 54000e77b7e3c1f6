"""A bucket dataset (imported in place from a user's bucket on moto) walked in chromium, with Lanner's own blobs on
disk and in a bucket of their own: the grid's thumbnails (Lanner's) and the image page's and the editor's
full-size image (the user's object, through Lanner's link and its redirect to a presigned URL) load under the
pages' Content-Security-Policy, which allows the user's bucket on the pages that show its images and nowhere else."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from cryptography.fernet import Fernet
from playwright.sync_api import expect

from lanner.synthetic import make_detection_dataset
from tests.servers import start_server, wait_for
from tests.storage.moto import CREDENTIALS, new_bucket, s3_env
from tests.web.conftest import VIEWPORT, WebServer, browser, screenshot, signed_in  # noqa: F401  (browser)

pytestmark = pytest.mark.browser


def img_src(policy: str) -> list[str]:
    return next(part.split()[1:] for part in policy.split(";") if part.split()[:1] == ["img-src"])


@pytest.mark.parametrize("store", ["local", "s3"])
def test_a_bucket_datasets_images_render_under_the_policy(browser: Any, tmp_path: Path,  # noqa: F811
                                                          moto_endpoint: str, store: str) -> None:
    photos = new_bucket(moto_endpoint)  # the user's
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1",
                      aws_access_key_id=CREDENTIALS["access_key_id"],
                      aws_secret_access_key=CREDENTIALS["secret_access_key"])
    folder = make_detection_dataset(tmp_path / "shapes", train=3, val=1, size=160).parent
    for path in folder.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket=photos, Key=path.relative_to(folder).as_posix(), Body=path.read_bytes())
    env = {"LANNER_SECRETS_KEY": Fernet.generate_key().decode(), "LANNER_BUCKET_ALLOWED_NETWORKS": "127.0.0.0/8"}
    if store == "s3":
        env |= s3_env(moto_endpoint, new_bucket(moto_endpoint))  # Lanner's own bucket, on the same server
    web = WebServer(start_server(tmp_path / "home", **env))
    try:
        alice = web.user("alice")
        integration = web.api(alice, "POST", "/api/integrations/buckets", json={
            "provider": "s3", "targets": [photos], "credentials": {
                "accessKeyId": "AKIALANNER", "secretAccessKey": "s3cr3t", "endpoint": moto_endpoint}})
        assert integration.status_code == 201, integration.text
        assert web.api(alice, "POST", "/api/datasets", json={"name": "shapes"}).status_code == 201
        job = web.api(alice, "POST", "/api/datasets/alice/shapes/bucket-imports",
                      json={"integrationId": integration.json()["id"], "target": photos}).json()
        done = wait_for(lambda: (r := web.api(alice, "GET", f"/api/datasets/alice/shapes/bucket-imports/"
                                              f"{job['id']}").json())["status"] in ("succeeded", "failed") and r,
                        timeout=120, what="the bucket import")
        assert done["status"] == "succeeded" and done["result"]["added"] == 4, done

        context = browser.new_context(viewport=VIEWPORT, base_url=web.url)
        responses: list[tuple[str, int]] = []
        errors: list[str] = []
        context.on("response", lambda r: responses.append((r.url, r.status)))
        context.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page = context.new_page()
        signed_in(page, alice, "/datasets/alice/shapes")
        origin = moto_endpoint  # scheme, host and port of every presigned URL here
        grid_policy = page.request.get("/datasets/alice/shapes").headers["content-security-policy"]
        assert (img_src(grid_policy) if "img-src" in grid_policy else ["'self'"]) == (
            ["'self'", origin] if store == "s3" else ["'self'"])  # Lanner's thumbnails: its own store's origin
        thumbs = page.locator("#ds-grid .ds-grid > li")
        expect(thumbs).to_have_count(4)
        page.wait_for_load_state("networkidle")
        thumb_sources = page.locator("#ds-grid svg image").evaluate_all("images => images.map(i => i.href.baseVal)")
        assert {status for url, status in responses if url in thumb_sources} == {200}

        thumbs.first.locator("a").click()
        expect(page.locator("#ds-image image")).to_have_count(1)
        drawn = page.locator("#ds-image image").evaluate(
            "i => new Promise(ok => { const c = new Image(); c.onload = () => ok([c.naturalWidth, c.naturalHeight]);"
            " c.onerror = () => ok(null); c.src = i.href.baseVal; })")
        assert drawn == [160, 160], (drawn, errors)  # the page's own link, followed to the bucket, decodes
        page.wait_for_load_state("networkidle")
        policy = page.request.get(page.url).headers["content-security-policy"]
        assert img_src(policy) == ["'self'", origin]  # the user's bucket, for the page that shows its image
        pixels = [(url, status) for url, status in responses if url.startswith(f"{origin}/{photos}/images/")]
        assert pixels and all(status == 200 for _, status in pixels), pixels
        shot = screenshot(page, f"bucket-dataset-image-{store}")

        page.get_by_role("link", name="Annotate").click()
        page.wait_for_url("**/annotate/**")
        page.wait_for_load_state("networkidle")
        assert len([u for u, s in responses if u.startswith(f"{origin}/{photos}/images/") and s == 200]) > len(pixels)
        assert img_src(page.request.get(page.url).headers["content-security-policy"]) == ["'self'", origin]
        assert not errors, errors  # a Content-Security-Policy refusal is a console error
        hosts = {urlsplit(url).netloc for url, _ in responses}
        assert hosts <= {urlsplit(web.url).netloc, urlsplit(moto_endpoint).netloc}, hosts
        assert shot.stat().st_size > 10_000
        context.close()
    finally:
        web.stop()
