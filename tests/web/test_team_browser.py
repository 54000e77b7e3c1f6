"""Teams in a real browser against a real server: an admin creates a team, makes an invitation link (copied with
its button), a second person accepts it in another browser, the admin changes their role and removes them (the
confirm accepted), the removed person's next page is a 404, and the activity page lists all of it, newest
first. The same forms also work with JavaScript off. Every context fails the test on a request to another host
or a browser error (a CSP violation among them): see ``conftest``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import WebServer, check_recorder, new_context, screenshot, signed_in

pytestmark = pytest.mark.browser


def test_a_team_from_creation_through_an_invitation_to_removal(browser: Any, web_server: WebServer) -> None:
    olga, bob = web_server.user("olga"), web_server.user("bob")
    admin_context, admin_recorder = new_context(browser, web_server, permissions=["clipboard-read", "clipboard-write"])
    guest_context, guest_recorder = new_context(browser, web_server)
    admin, guest = admin_context.new_page(), guest_context.new_page()
    admin.on("dialog", lambda dialog: dialog.accept())  # the confirms of Remove (htmx's hx-confirm)

    signed_in(admin, olga, "/account")
    admin.get_by_role("navigation", name="Account").get_by_role("link", name="Teams").click()
    admin.wait_for_url("**/teams")
    admin.get_by_label("Name", exact=True).fill("acme")
    admin.get_by_label("Full name").fill("Acme Vision")
    admin.get_by_role("button", name="Create team").click()
    admin.wait_for_url("**/teams/acme")
    expect(admin.locator("#messages")).to_contain_text("Team “acme” created")
    expect(admin.locator('#member-list tr[data-member="olga"]')).to_contain_text("owner")

    admin.locator("#invite-role").select_option("editor")
    admin.get_by_role("button", name="Create invitation link").click()
    shown = admin.locator("#invitation-link")
    shown.wait_for()
    link = shown.input_value()
    assert re.fullmatch(rf"{re.escape(web_server.url)}/invitations/inv_[\w-]+", link), link
    assert admin.url.endswith("/teams/acme")  # htmx swapped the section: the link is in no URL
    copy = admin.locator('[data-copy="invitation-link"]')
    copy.click()
    expect(copy).to_have_text("Copied")
    assert admin.evaluate("navigator.clipboard.readText()") == link
    expect(admin.locator("#invitation-list tbody tr")).to_have_count(1)
    screenshot(admin, "team-invitation")

    path = link.removeprefix(web_server.url)
    signed_in(guest, bob, path)  # signed out, the link goes through the sign-in page and back
    expect(guest.locator("h1")).to_have_text("Join acme")
    expect(guest.locator("main")).to_contain_text("editor")
    guest.get_by_role("button", name="Accept and join acme").click()
    guest.wait_for_url("**/teams/acme")
    expect(guest.locator("#messages")).to_contain_text("You joined team “acme” as editor.")
    assert guest.locator("#add-member").count() == 0  # an editor manages nobody

    admin.reload()
    expect(admin.locator("#invitation-list")).to_have_count(0)  # used: no longer pending
    row = admin.locator('#member-list tr[data-member="bob"]')
    row.get_by_label("Role of bob").select_option("viewer")
    row.get_by_label(re.compile("Monthly budget of bob")).fill("25")
    admin.get_by_role("button", name="Save bob").click()
    expect(admin.locator("#team .flash-success")).to_contain_text("bob now has role viewer and a budget of $25.00")
    expect(admin.locator('#member-list tr[data-member="bob"] select')).to_have_value("viewer")
    screenshot(admin, "team")
    admin.reload()  # the screenshot leaves style="" on inputs (hiding the caret); htmx would copy it in a swap
    admin.get_by_role("button", name="Remove bob").click()
    expect(admin.locator("#team .flash-success")).to_contain_text("Removed bob from acme")
    expect(admin.locator('#member-list tr[data-member="bob"]')).to_have_count(0)

    response = guest.goto("/teams/acme")  # the removed member's very next request
    assert response is not None and response.status == 404
    expect(guest.locator("h1")).to_have_text("Not found")
    response = guest.goto(path)
    assert response is not None and response.status == 404
    expect(guest.locator("h1")).to_have_text("This invitation link is not valid")

    admin.get_by_role("link", name="Activity").click()
    admin.wait_for_url("**/teams/acme/activity")
    actions = admin.locator("#activity-list tbody tr").evaluate_all("rows => rows.map(r => r.dataset.action)")
    assert actions == ["member_removed", "budget_set", "role_changed", "member_joined", "invited", "created"]
    first = admin.locator("#activity-list tbody tr").first
    expect(first).to_contain_text("olga")
    expect(first).to_contain_text("user bob")
    expect(admin.locator('#activity-list tr[data-action="role_changed"]')).to_contain_text("editor → viewer")
    expect(admin.locator('#activity-list tr[data-action="member_joined"]')).to_contain_text("bob")
    screenshot(admin, "team-activity")

    for context, recorder in ((admin_context, admin_recorder), (guest_context, guest_recorder)):
        context.close()
        check_recorder(recorder)


def test_the_team_forms_work_without_javascript(page_without_js: Any, web_server: WebServer) -> None:
    page = page_without_js
    web_server.user("carol")
    signed_in(page, web_server.user("dan"), "/teams")
    page.get_by_label("Name", exact=True).fill("nojs")
    page.get_by_role("button", name="Create team").click()
    page.wait_for_url("**/teams/nojs")
    page.get_by_label("Username").fill("carol")
    page.locator("#add-role").select_option("editor")
    page.get_by_role("button", name="Add member").click()
    page.wait_for_url("**/teams/nojs")
    expect(page.locator("#messages")).to_contain_text("Added carol as editor.")
    page.get_by_label("Role of carol").select_option("admin")
    page.get_by_role("button", name="Save carol").click()
    expect(page.locator("#messages")).to_contain_text("carol now has role admin")
    page.get_by_role("button", name="Create invitation link").click()
    assert page.locator("#invitation-link").input_value().startswith(web_server.url + "/invitations/inv_")
    page.get_by_role("button", name="Remove carol").click()  # without JavaScript there is no confirm
    expect(page.locator("#messages")).to_contain_text("Removed carol from nojs")
