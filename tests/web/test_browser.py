"""The pages in a real browser (headless Debian chromium) against a real server: sign in and out, an API key
created, copied and revoked, the account after ``lanner credits add``, the dashboard, the same forms with
JavaScript off, and keyboard access. Every test also fails on a request to another host or a browser error (a
CSP violation among them): see ``conftest.page``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect
from sqlalchemy import update

from lanner.billing.models import LedgerTransaction
from lanner.cli import demo
from lanner.config import Settings
from lanner.context import AppContext
from lanner.gpus.catalogue import get_catalogue
from tests.ledger import DOLLAR, make_run, spend_on
from tests.web.conftest import (
    User,
    WebServer,
    check_recorder,
    foreign_requests,
    new_context,
    screenshot,
    signed_in,
)

pytestmark = pytest.mark.browser


def test_sign_in_and_out(page: Any, web_server: WebServer) -> None:
    alice = web_server.user("alice")
    page.goto("/account")
    assert re.search(r"/login\?next=/account$", page.url)
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text() == "Wrong username or password."
    assert page.locator("#field-password-error").inner_text() == "Check your password."
    screenshot(page, "sign-in-error")
    page.get_by_label("Password").fill(alice.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/account")
    assert page.get_by_role("link", name=re.compile("Account")).get_attribute("aria-current") == "page"
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login")
    assert "You are signed out." in page.locator("#messages").inner_text()
    page.goto("/account")
    assert "/login" in page.url


def test_an_api_key_is_shown_once_copied_and_revoked(page: Any, web_server: WebServer) -> None:
    alice = web_server.user("alice")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    signed_in(page, alice, "/account/keys")
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Create key").click()
    shown = page.locator("#new-key")
    shown.wait_for()
    key = shown.input_value()
    assert re.fullmatch(r"ul_[0-9a-f]{40}", key)
    assert page.url.endswith("/account/keys")  # htmx swapped the section: no navigation, the key is in no URL
    copy = page.locator('[data-copy="new-key"]')  # by what it copies: its name changes to "Copied"
    expect(copy).to_have_text("Copy")
    assert copy.is_visible()
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == key
    screenshot(page, "api-keys")
    assert web_server.api(User("alice", key), "GET", "/api/account/summary").status_code == 200
    page.reload()
    assert page.locator("#new-key").count() == 0 and key not in page.content()
    row = page.locator("#key-list tr", has_text="laptop")
    assert key[:7] in row.inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name=re.compile("Revoke")).click()
    page.get_by_text("revoked: programs using it are refused now").wait_for()
    assert page.locator("#key-list tr", has_text="laptop").count() == 0
    assert web_server.api(User("alice", key), "GET", "/api/account/summary").status_code == 401


def _runs(web_server: WebServer, user: User) -> None:
    """Three charged runs over the last days and one still holding credit, as training would leave them."""
    now = datetime.now(UTC)
    with web_server.db.session() as session:  # the initial credit came first
        session.execute(update(LedgerTransaction).where(LedgerTransaction.user_id == user.user_id)
                        .values(created_at=now - timedelta(days=10)))
    runs = ((6, "yolo11n-640", "rtx-4090", 1_420_000), (3, "yolo11s-640", "l40s", 3_870_000),
            (1, "yolo11m-960", "h100-sxm", 6_240_000))
    for days_ago, model, gpu, charge in runs:
        run_id, model_id = make_run(web_server.db, user.user_id, project="traffic-signs", model=model, gpu=gpu)
        spend_on(web_server.db, user.user_id, run_id, model_id, hold=charge * 2, charge=charge, gpu=gpu,
                 at=now - timedelta(days=days_ago))
    run_id, model_id = make_run(web_server.db, user.user_id, project="traffic-signs", model="yolo11l-960",
                                gpu="h100-sxm")
    spend_on(web_server.db, user.user_id, run_id, model_id, hold=9 * DOLLAR, charge=870_000, gpu="h100-sxm",
             settle=False)


def test_the_account_shows_a_transaction_after_credits_add(page: Any, browser: Any, web_server: WebServer) -> None:
    bob = web_server.user("bob", credits=50)
    _runs(web_server, bob)
    web_server.cli("credits", "add", "bob", "12.5")
    signed_in(page, bob, "/account")
    first = page.locator("#transactions tbody tr").first
    assert "+$12.50" in first.inner_text() and "$50.10" in first.inner_text()
    assert page.locator("[data-live-field=available]").inner_text() == "$41.97"
    assert page.locator("[data-live-field=held]").inner_text() == "$8.13"  # the running run's hold, less its charge
    held = page.locator("#hold-list tbody tr")
    assert held.count() == 1 and "traffic-signs/yolo11l-960" in held.inner_text()
    assert held.get_by_role("link").get_attribute("href") == "/bob/traffic-signs/yolo11l-960"
    assert page.locator("#cost-list tbody tr").count() == 4
    page.locator("#spend-chart canvas").wait_for()  # uPlot drew the chart (the CSP let it)
    screenshot(page, "account")
    web_server.cli("credits", "add", "bob", "1")  # the figures follow the ledger while the page is open
    page.locator("[data-live-field=available]", has_text="$42.97").wait_for(timeout=10_000)
    dark, recorder = new_context(browser, web_server, color_scheme="dark")
    try:
        dark_page = signed_in(dark.new_page(), bob, "/account")
        dark_page.locator("#spend-chart canvas").wait_for()
        background = dark_page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(18, 21, 27)"
        screenshot(dark_page, "account-dark")
    finally:
        dark.close()
    check_recorder(recorder)


def test_the_dashboard_links_to_datasets_projects_and_gpus(page: Any, web_server: WebServer) -> None:
    carol = web_server.user("carol", credits=25)
    ctx = AppContext.from_settings(Settings(home=web_server.server.home, public_url=web_server.url))
    try:
        assert demo.ensure_dataset(ctx, username="carol") == 32  # the demo's synthetic dataset, imported as usual
    finally:
        ctx.db.dispose()
    assert web_server.api(carol, "POST", "/api/datasets", json={"name": "Traffic signs"}).status_code == 201
    assert web_server.api(carol, "POST", "/api/projects", json={"name": "Sign detector"}).status_code in (200, 201)
    for model in ("yolo11n-640", "yolo11s-640"):
        make_run(web_server.db, carol.user_id, project="shapes-detector", model=model)
    signed_in(page, carol)
    rows = page.locator("#dataset-list tbody tr")
    assert rows.count() == 2
    assert "32" in rows.filter(has_text="shapes").inner_text()
    assert rows.get_by_role("link", name="shapes").get_attribute("href") == "/datasets/carol/shapes"
    projects = page.locator("#project-list tbody tr")
    assert projects.filter(has_text="shapes-detector").locator("td").nth(1).inner_text() == "2"
    assert page.get_by_role("link", name="Sign detector").get_attribute("href") == "/carol/sign-detector"
    screenshot(page, "home")
    page.get_by_role("link", name="GPUs and prices").click()
    page.wait_for_url("**/gpus")
    offered = {gpu.id for gpu in get_catalogue(Settings(home=web_server.server.home)).offered()}
    assert offered <= set(page.locator("#gpu-catalogue tbody tr").evaluate_all("rows => rows.map(r => r.dataset.gpu)"))
    expect(page.locator('#gpu-catalogue tr[data-gpu="h200-sxm"]')).to_contain_text("Needs pro")  # carol: free tier
    screenshot(page, "gpus")


def test_the_forms_work_without_javascript(page_without_js: Any, web_server: WebServer) -> None:
    page = page_without_js
    dave = web_server.user("dave")
    signed_in(page, dave, "/account/keys")
    page.get_by_label("Name").fill("no-js")
    page.get_by_role("button", name="Create key").click()
    assert page.locator("#new-key").input_value().startswith("ul_")
    assert page.get_by_role("button", name="Copy").count() == 0  # hidden: it needs JavaScript to work
    page.goto("/account/keys")
    page.locator("#key-list tr", has_text="no-js").get_by_role("button", name=re.compile("Revoke")).click()
    assert "revoked" in page.locator("#messages").inner_text()
    page.get_by_role("button", name="Sign out").click()
    assert page.url.endswith("/login")


def test_the_keyboard_reaches_everything(page: Any, web_server: WebServer) -> None:
    signed_in(page, web_server.user("erin"), "/account/keys")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    for _ in range(10):  # from the main content, Tab reaches the key form's field
        if page.evaluate("document.activeElement.id") == "field-name":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "field-name"
    page.keyboard.type("by-keyboard")
    page.keyboard.press("Enter")
    page.locator("#new-key").wait_for()


def test_a_request_to_another_host_is_caught(browser: Any, web_server: WebServer) -> None:
    """The check every browser test relies on: such a request is recorded (and blocked)."""
    context, recorder = new_context(browser, web_server)
    try:
        page = context.new_page()
        page.goto("/login")
        page.evaluate("fetch('http://elsewhere.invalid/pixel.png', {mode: 'no-cors'}).catch(() => null)")
        page.goto("about:blank")
        page.evaluate("fetch('http://elsewhere.invalid/track').catch(() => null)")
    finally:
        context.close()
    assert "http://elsewhere.invalid/track" in foreign_requests(recorder.requests, web_server.url)
    assert any("Content Security Policy" in error for error in recorder.errors)  # our page's fetch: refused
