"""An invitation accepted by a new sign-up, in a real browser against a server started with
``LANNER_SIGNUPS=true``: the admin's link, opened signed out by a person without an account, leads to the
sign-up form; the new account lands on the team's page, signed in, as a member. No request to another host, no
browser error (see ``conftest``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.servers import start_server
from tests.web.conftest import WebServer, check_recorder, new_context, screenshot, signed_in

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    web = WebServer(start_server(tmp_path_factory.mktemp("signups-server"), LANNER_SIGNUPS="true"))
    yield web
    web.stop()


def test_a_person_without_an_account_signs_up_from_an_invitation(browser: Any, web_server: WebServer) -> None:
    olga = web_server.user("olga")
    admin_context, admin_recorder = new_context(browser, web_server)
    guest_context, guest_recorder = new_context(browser, web_server)
    admin, guest = admin_context.new_page(), guest_context.new_page()

    signed_in(admin, olga, "/teams")
    admin.get_by_label("Name", exact=True).fill("Acme Vision")
    admin.get_by_role("button", name="Create team").click()
    admin.wait_for_url("**/teams/acme-vision")
    admin.locator("#invite-role").select_option("editor")
    admin.get_by_role("button", name="Create invitation link").click()
    link = admin.locator("#invitation-link")
    link.wait_for()
    path = link.input_value().removeprefix(web_server.url)

    guest.goto(path)  # signed out, no account
    expect(guest.locator("h1")).to_have_text("Join acme-vision")
    guest.get_by_role("link", name="Create an account and join acme-vision").click()
    guest.wait_for_url(f"**{path}/signup")
    guest.get_by_label("Username").fill("nina")
    guest.get_by_label("Password").fill("short")
    guest.get_by_role("button", name="Create account and join acme-vision").click()
    expect(guest.locator("#field-password-error")).to_contain_text("at least 8")
    screenshot(guest, "team-invitation-signup")
    guest.get_by_label("Password").fill("a long password")
    guest.get_by_role("button", name="Create account and join acme-vision").click()
    guest.wait_for_url("**/teams/acme-vision")
    expect(guest.locator("#messages")).to_contain_text("Welcome, nina: you joined team “acme-vision” as editor.")
    expect(guest.locator('#member-list tr[data-member="nina"]')).to_contain_text("editor")
    expect(guest.get_by_role("button", name="Sign out")).to_be_visible()

    admin.reload()
    expect(admin.locator('#member-list tr[data-member="nina"]')).to_contain_text("editor")
    admin_context.close()
    guest_context.close()
    check_recorder(admin_recorder)
    check_recorder(guest_recorder)
