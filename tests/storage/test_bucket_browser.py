"""The dataset page with the blobs in a bucket (moto's S3 server): the browser PUTs the archive straight to the
bucket's presigned URL (a CORS request, without Lanner's CSRF token), and the dataset's thumbnails load from the
bucket under the pages' Content-Security-Policy. Only the server and the bucket are contacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import expect

from tests.servers import start_server
from tests.storage.moto import s3_env
from tests.web.conftest import VIEWPORT, WebServer, browser, signed_in  # noqa: F401  (browser: the fixture)
from tests.web.test_dataset_browser import IMAGES, synthetic_zip

pytestmark = pytest.mark.browser

CORS = """<CORSConfiguration><CORSRule><AllowedOrigin>{origin}</AllowedOrigin><AllowedMethod>GET</AllowedMethod>
<AllowedMethod>PUT</AllowedMethod><AllowedHeader>*</AllowedHeader></CORSRule></CORSConfiguration>"""


def test_the_dataset_page_uploads_to_the_bucket_and_shows_its_images(browser: Any, tmp_path: Path,  # noqa: F811
                                                                      moto_endpoint: str, bucket: str) -> None:
    web = WebServer(start_server(tmp_path / "home", **s3_env(moto_endpoint, bucket)))
    try:
        cors = httpx.put(f"{moto_endpoint}/{bucket}?cors", content=CORS.format(origin=web.url), timeout=10)
        assert cors.status_code == 200, cors.text
        context = browser.new_context(viewport=VIEWPORT, base_url=web.url)
        requests: list[tuple[str, str, dict[str, str]]] = []
        errors: list[str] = []
        responses: list[tuple[str, int]] = []
        context.on("response", lambda r: responses.append((r.url, r.status)))
        context.on("request", lambda r: requests.append((r.method, r.url, r.headers)))
        context.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page = context.new_page()
        signed_in(page, web.user("alice"), "/datasets")
        page.locator("#field-name").fill("Shapes")
        page.locator("#ds-file").set_input_files(str(synthetic_zip(tmp_path)))
        page.locator("#import-report").wait_for(timeout=120_000)
        expect(page.locator("#ds-upload-step")).to_have_text(f"Imported {IMAGES} images.")
        puts = [(url, headers) for method, url, headers in requests if method == "PUT"]
        assert len(puts) == 1 and puts[0][0].startswith(f"{moto_endpoint}/{bucket}/lanner/staging/")
        assert "x-csrftoken" not in {name.lower() for name in puts[0][1]}

        page.locator("#import-report").get_by_role("link", name="Open the dataset").click()
        page.wait_for_url("**/datasets/alice/shapes")
        thumbs = page.locator("#ds-grid .ds-grid > li")
        expect(thumbs).to_have_count(IMAGES)
        sources = page.locator("#ds-grid svg image").evaluate_all("images => images.map(i => i.href.baseVal)")
        assert len(sources) == IMAGES and all(src.startswith(moto_endpoint) for src in sources), sources
        page.wait_for_load_state("networkidle")
        loaded = {url for url, status in responses if status == 200}
        assert set(sources) <= loaded, set(sources) - loaded  # the CSP allowed them (the duplicate's is one URL)
        hosts = {urlsplit(url).netloc for _, url, _ in requests if url.startswith("http")}
        assert hosts <= {urlsplit(web.url).netloc, urlsplit(moto_endpoint).netloc}, hosts
        assert not errors, errors
        context.close()
    finally:
        web.stop()
