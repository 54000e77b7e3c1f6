"""The API reference (``/docs``): Swagger UI, vendored (``static/vendor/swagger-ui-*``), over this server's
``/openapi.json``. FastAPI's own page loads Swagger UI from a public CDN and starts it with an inline script:
blank on a machine without internet, and every visit announced to the CDN. This one loads nothing from another
host and inlines nothing (``static/api-docs.js`` starts Swagger UI), so it runs under the pages' policy; the
only addition is ``img-src data:`` for the icons Swagger UI's stylesheet embeds (``lanner.http.security_headers``).
ReDoc is not served (``create_app`` turns it off)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from lanner.web.templating import render

router = APIRouter(include_in_schema=False)
SWAGGER_UI = "5.36.0"  # swagger-ui-dist, vendored: static/vendor/VENDORED.md


@router.get("/docs", response_class=HTMLResponse)
def api_reference(request: Request) -> HTMLResponse:
    """Public, like ``/openapi.json`` it reads: the routes are the same for everyone."""
    return render(request, "api_docs.html", {"openapi_url": request.app.openapi_url, "swagger_ui": SWAGGER_UI})
