"""The visitor's progress page in a real headless Chromium, served by daphne (config.asgi) as in
production, with V0 as a local v2 server: live progress, a reload mid-stream, the preview, a failure."""

import os
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser import CHROMIUM_ARGS, TIMEOUT_MS  # noqa: F401  (the chromium fixture comes from the plugin)
from tests.conftest import subprocess_env, web_process
from tests.prototypes.conftest import make_lead

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", "/tmp/prototype-screenshots"))


@pytest.fixture
def daphne(fake_v0):
    """daphne serving config.asgi on a free port, on the test database, V0 pointed at the fake."""
    env = subprocess_env(
        V0_API_URL=fake_v0.url,
        V0_API_KEY=fake_v0.behaviour.api_key,
        DEBUG="true",  # static files from the app folders, as under runserver
        LOG_LEVEL="WARNING",
    )
    with web_process(env, server="daphne", stdout=None, stderr=None) as (_, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def page(chromium, daphne):
    context = chromium.new_context(base_url=daphne, locale="en-US", timezone_id="UTC")
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


def screenshot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_the_visitor_watches_it_being_built_reloads_mid_way_and_gets_the_preview(page, fake_v0):
    fake_v0.behaviour.frame_interval = 0.8
    fake_v0.behaviour.parts = 4
    lead = make_lead()
    page.goto(f"/prototype/{lead.public_id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Ada, we are building your prototype")
    content = page.content()
    assert "Lovelace" not in content and lead.email not in content, "only the visitor's first name"

    expect(page.locator("[data-status]")).to_have_text("Writing app/page.tsx")
    expect(page.locator("[data-title]")).to_have_text("Reporting automation")
    screenshot(page, "progress-mid-stream")
    page.reload()
    log = page.locator("[data-log] li")
    expect(log.first).to_have_text("Starting your prototype", timeout=2000)  # kept across the reload
    expect(page.locator("[data-done]")).to_be_visible(timeout=15_000)
    chat_id = next(iter(fake_v0.chats))
    expect(page.get_by_role("link", name="Open your prototype")).to_have_attribute(
        "href", f"https://preview.example.com/{chat_id}"
    )
    expect(page.get_by_role("heading", level=1)).to_have_text("Ada, your prototype is ready")
    page.get_by_role("button", name="Show it on this page").click()
    expect(page.locator("[data-preview-frame]")).to_have_attribute("src", f"https://preview.example.com/{chat_id}")
    statuses = log.all_inner_texts()
    assert statuses.count("Writing app/page.tsx") == 1, "the reload continued where it was: nothing twice"
    assert "Running a build step" in statuses
    assert len(fake_v0.chats) == 1
    screenshot(page, "progress-complete")

    page.reload()  # done: the page shows the result without a stream
    expect(page.locator("[data-done]")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_have_text("Ada, your prototype is ready")
    screenshot(page, "progress-complete-revisited")


def test_the_visitor_is_told_clearly_when_it_fails(page, fake_v0):
    fake_v0.behaviour.create_status = 422
    lead = make_lead()
    page.goto(f"/prototype/{lead.public_id}/")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("We could not finish your prototype this time")
    expect(page.get_by_role("heading", level=1)).to_have_text("Ada, we are sorry")
    screenshot(page, "progress-failed")
    page.reload()
    expect(page.get_by_role("alert")).to_contain_text("Our team has been told")


def test_an_unknown_lead_has_no_page(page):
    assert page.goto(f"/prototype/{uuid.uuid4()}/").status == 404
