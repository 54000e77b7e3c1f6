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
    health = page.locator(".opblock", has_text="/api/health")
    expect(health).to_be_visible()
    assert page.locator(".opblock").count() > 50  # every operation of the document, not an empty shell
    screenshot(page, "api-reference")
    health.locator(".opblock-summary").click()
    health.get_by_role("button", name="Try it out").click()
    health.get_by_role("button", name="Execute").click()
    expect(health.locator(".live-responses-table td.response-col_status:not(.col_header)")).to_have_text("200")
