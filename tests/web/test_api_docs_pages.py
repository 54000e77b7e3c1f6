"""The API reference (``/docs``) is served by Lanner itself: Swagger UI vendored, started from a static file,
under the pages' Content-Security-Policy; ReDoc is not served. In-process here; the browser test is in
``test_api_docs_browser.py``."""

from __future__ import annotations

from urllib.parse import urlsplit

from tests.web.pages import soup


def test_the_api_reference_references_only_this_server(client):
    response = client.get("/docs")
    assert response.status_code == 200
    page = soup(response)
    urls = [tag.get(attribute) for tag in page.find_all(True) for attribute in ("src", "href")
            if tag.get(attribute)]
    assert urls and all(not urlsplit(url).netloc and url.startswith("/") for url in urls), urls
    assert page.select("style, [style]") == [] and all(s.get("src") for s in page.select("script"))
    assert [a for tag in page.find_all(True) for a in tag.attrs if a.startswith("on")] == []
    assert page.select_one('link[rel="icon"]')["href"].startswith("/static/favicon.svg?v=")
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "http" not in policy and "unsafe-inline" not in policy
    for url in urls + [page.select_one("#swagger-ui")["data-openapi-url"]]:
        assert client.get(url).status_code == 200, url
    assert client.get("/static/vendor/swagger-ui-5.36.0.LICENSE").status_code == 200
    assert client.get("/redoc").status_code == 404
