"""A new team's credit in a real browser (issue 27 item 6: a new team had $0 and the web no way to fund it): its
owner creates "Acme Vision" by that name, then moves part of their own credit to it with the team page's form;
asking for more than they have shows the error next to the field. No request to another host, no browser
error (see ``conftest``)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import WebServer, screenshot, signed_in

pytestmark = pytest.mark.browser


def test_an_owner_names_a_team_freely_and_funds_it_from_their_credit(page: Any, web_server: WebServer) -> None:
    owner = web_server.user("frida", credits=30)
    signed_in(page, owner, "/teams")
    page.get_by_label("Name", exact=True).fill("Acme Vision")
    page.get_by_role("button", name="Create team").click()
    page.wait_for_url("**/teams/acme-vision")
    expect(page.locator("#team-list, main")).to_contain_text("Acme Vision")
    team_credit = page.locator(".stat", has_text="Team credit")
    expect(team_credit).to_contain_text("$0.00")

    amount = page.get_by_label("Amount in dollars")
    expect(page.locator("#fund")).to_contain_text("$30.00 available")
    amount.fill("40")
    page.get_by_role("button", name="Add credit").click()
    expect(page.locator("#fund-amount-error")).to_contain_text("$30.00 of your credit is available")
    expect(page.get_by_label("Amount in dollars")).to_have_attribute("aria-invalid", "true")

    page.get_by_label("Amount in dollars").fill("12.50")
    page.get_by_role("button", name="Add credit").click()
    expect(page.locator("#team .flash-success")).to_contain_text("Added $12.50 of your credit to acme-vision")
    expect(page.locator(".stat", has_text="Team credit")).to_contain_text("$12.50")
    expect(page.locator("#fund")).to_contain_text("$17.50 available")
    screenshot(page, "team-funding")
    page.reload()  # not only the swapped fragment: the ledger says so
    expect(page.locator(".stat", has_text="Team credit")).to_contain_text("$12.50")
    page.get_by_role("link", name="Activity").click()
    page.wait_for_url("**/teams/acme-vision/activity")
    expect(page.locator("tr", has_text="gave the team")).to_contain_text("credit $12.50")
