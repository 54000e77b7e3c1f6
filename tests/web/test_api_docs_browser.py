"""The API reference in a real browser: ``/docs`` draws the operations with nothing from another host and no
browser error (a CSP violation among them: see ``conftest``), on a machine without internet as on any other."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import screenshot

pytestmark = pytest.mark.browser


def test_the_api_reference_shows_the_operations_offline(page: Any) -> None:
    page.goto("/docs")
    expect(page.locator(".opblock").first).to_be_visible()
    # Every operation of the document, not an empty shell. Past 150 rows Swagger UI draws only the operations in
    # view (its window virtualizer), so the count is read from its store, not from the page.
    assert page.evaluate("window.ui.specSelectors.operations().size") > 100
    screenshot(page, "api-reference")
    health = page.locator(".opblock", has_text="/api/health")
    for _ in range(200):  # scroll as a reader does until the operation is drawn (it is near the end)
        if health.count():
            break
        page.mouse.wheel(0, 600)
        page.wait_for_timeout(50)
    expect(health).to_be_visible()
    health.locator(".opblock-summary").click()
    health.get_by_role("button", name="Try it out").click()
    health.get_by_role("button", name="Execute").click()
    expect(health.locator(".live-responses-table td.response-col_status:not(.col_header)")).to_have_text("200")
