"""A visitor fills the lead form at `/` in a real headless Chromium, against the live server and its API."""

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from jobs.models import Job
from leadgen.consent import CONSENT_TEXT
from leadgen.models import Lead

pytestmark = pytest.mark.browser

LEAD_JOBS = ["leadgen.confirmation_email", "leadgen.lead_alert", "leadgen.lead_arrived", "leadgen.pipedrive_sync"]
RECAPTCHA_STUB = """
window.grecaptcha = {
  ready: (callback) => callback(),
  execute: (siteKey, options) => Promise.resolve(`token-for-${siteKey}-${options.action}`),
};
"""


@pytest.fixture(autouse=True)
def offline(settings):
    """Every integration off, so the intake answers from the rules and nothing calls out."""
    settings.RECAPTCHA_SITE_KEY = ""
    settings.RECAPTCHA_SECRET_KEY = ""
    settings.LLM_BASE_URL = ""
    settings.PIPEDRIVE_API_TOKEN = ""
    settings.CLICKUP_API_TOKEN = ""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


def choose_service(page, name):
    page.get_by_role("radio", name=name).check()
    page.get_by_role("button", name="Next").click()


def fill_contact(page, *, first_name="Grace", email="grace@hopper.example", phone=""):
    page.get_by_label("First name").fill(first_name)
    page.get_by_label("Work email").fill(email)
    page.get_by_label("Phone").fill(phone)
    page.get_by_role("checkbox", name=CONSENT_TEXT).check()


def expect_success(page, first_name="Grace"):
    expect(page.get_by_role("heading", name=f"Thank you, {first_name}!")).to_be_focused()
    expect(page.locator("#lead-form")).to_be_hidden()


def lead_job_kinds(lead):
    return sorted(Job.objects.filter(key__endswith=f":{lead.pk}").values_list("kind", flat=True))


def test_a_visitor_sends_the_form_and_becomes_a_lead(browser_page, live_server):
    page = browser_page
    hosts = set()
    page.on("request", lambda request: hosts.add(urlsplit(request.url).netloc))
    page.goto("/?utm_source=newsletter&utm_campaign=autumn")
    current_step = page.locator('.progress li[aria-current="step"]')
    expect(current_step).to_contain_text("Service")

    choose_service(page, "Dedicated team")
    expect(page.get_by_role("heading", name="A few questions about your needs")).to_be_focused()
    expect(current_step).to_contain_text("Your needs")
    page.get_by_role("checkbox", name="Backend").check()
    page.get_by_role("checkbox", name="Data & AI").check()
    page.get_by_role("radio", name="3–5 people").check()
    page.get_by_role("radio", name="Within 3 months").check()
    page.get_by_role("radio", name="$50k–$150k").check()
    page.get_by_role("button", name="Next").click()

    expect(current_step).to_contain_text("Contact details")
    page.get_by_label("First name").fill("Ada")
    page.get_by_label("Last name").fill("Lovelace")
    page.get_by_label("Work email").fill("Ada@Analytical.example")
    page.get_by_label("Phone").fill("+1 415 555 0100")
    page.get_by_label("Company").fill("Analytical Engines")
    page.get_by_label("What would you like to achieve?").fill("Two engineers to build our data pipeline.")
    page.get_by_role("checkbox", name=CONSENT_TEXT).check()
    page.get_by_role("button", name="Send request").click()

    expect_success(page, "Ada")
    expect(page.locator("#lead-form-success")).to_contain_text("get back to you at Ada@Analytical.example")
    lead = Lead.objects.get()
    assert (lead.first_name, lead.last_name, lead.email, lead.phone, lead.company) == (
        "Ada", "Lovelace", "ada@analytical.example", "+14155550100", "Analytical Engines",
    )  # fmt: skip
    assert (lead.message, lead.service_type) == ("Two engineers to build our data pipeline.", "dedicated_team")
    assert lead.steps == {
        "Roles needed": ["Backend", "Data & AI"],
        "Team size": "3–5 people",
        "When would you like to start?": "Within 3 months",
        "Budget": "$50k–$150k",
    }
    assert lead.utm == {"source": "newsletter", "campaign": "autumn"}
    assert lead.source_page == f"{live_server.url}/?utm_source=newsletter&utm_campaign=autumn"
    assert (lead.channel, lead.status) == ("web_form", "lead")
    assert lead_job_kinds(lead) == LEAD_JOBS
    assert hosts == {urlsplit(live_server.url).netloc}, "no site key: nothing but our own server is called"


def test_api_errors_show_next_to_their_fields_and_the_fixed_form_goes_through(browser_page):
    page = browser_page
    page.goto("/")
    choose_service(page, "Strategic advice")
    page.get_by_role("button", name="Next").click()
    fill_contact(page, email="not-an-email", phone="12")
    page.get_by_role("button", name="Send request").click()

    email, phone = page.get_by_label("Work email"), page.get_by_label("Phone")
    expect(email).to_have_accessible_description("Enter a valid email address.")
    expect(phone).to_have_accessible_description(re.compile(r"Enter a valid phone number\.$"))
    expect(email).to_have_attribute("aria-invalid", "true")
    expect(phone).to_have_attribute("aria-invalid", "true")
    expect(email).to_be_focused()
    expect(page.get_by_label("First name")).not_to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("alert")).to_have_text("Please correct the highlighted fields.")
    assert not Lead.objects.exists() and not Job.objects.exists()

    email.fill("grace@hopper.example")
    expect(email).not_to_have_attribute("aria-invalid", "true")  # editing a field clears its error
    phone.fill("+44 20 7946 0958")
    page.get_by_role("button", name="Send request").click()

    expect_success(page)
    lead = Lead.objects.get()
    assert (lead.email, lead.phone, lead.service_type, lead.steps) == (
        "grace@hopper.example", "+442079460958", "strategic_advice", {},
    )  # fmt: skip


def test_a_second_prototype_request_while_one_is_in_progress_is_told_when_to_retry(browser_page):
    page = browser_page

    def send_a_diagnostic_request():
        page.goto("/")
        choose_service(page, "Diagnostic")
        page.get_by_role("button", name="Next").click()
        fill_contact(page)
        page.get_by_role("button", name="Send request").click()

    send_a_diagnostic_request()
    expect_success(page)
    send_a_diagnostic_request()
    expect(page.get_by_role("alert")).to_have_text(
        "A prototype is already being prepared for you. Please try again in 20 minutes."
    )
    expect(page.get_by_role("button", name="Send request")).to_be_enabled()
    expect(page.locator("#lead-form-success")).to_be_hidden()
    assert Lead.objects.count() == 1


def test_the_form_works_with_the_keyboard_alone(browser_page):
    page = browser_page
    page.goto("/")
    page.keyboard.press("Tab")  # the skip link
    page.keyboard.press("Tab")
    expect(page.get_by_role("radio", name="Diagnostic")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.get_by_role("radio", name="Strategic advice")).to_be_checked()
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="A few questions about your needs")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("radio", name="Growing revenue")).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="How can we reach you?")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.type("Grace")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.type("grace@hopper.example")
    for _ in range(4):  # phone, company, message, the consent box
        page.keyboard.press("Tab")
    expect(page.get_by_role("checkbox", name=CONSENT_TEXT)).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("Tab")  # Back
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Send request")).to_be_focused()
    page.keyboard.press("Enter")

    expect_success(page)
    lead = Lead.objects.get()
    assert (lead.first_name, lead.email) == ("Grace", "grace@hopper.example")
    assert lead.steps == {"Main challenge": "Growing revenue"}


def test_a_retry_after_a_lost_response_replays_it_instead_of_creating_a_second_lead(browser_page):
    page = browser_page
    keys = []

    def lose_the_first_response(route):
        keys.append(route.request.headers["idempotency-key"])
        if len(keys) == 1:
            route.fetch()  # the server gets it and creates the lead; the answer never comes back
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/api/leads", lose_the_first_response)
    page.goto("/")
    choose_service(page, "Technology strategy")
    page.get_by_role("button", name="Next").click()
    fill_contact(page)
    page.get_by_role("button", name="Send request").click()
    expect(page.get_by_role("alert")).to_contain_text("We could not reach our server")
    page.get_by_role("button", name="Send request").click()

    expect_success(page)
    assert len(keys) == 2 and keys[0] == keys[1]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", keys[0])
    assert Lead.objects.count() == 1


def test_with_a_site_key_the_form_sends_a_recaptcha_token_the_server_verifies(browser_page, settings, httpserver):
    settings.RECAPTCHA_SITE_KEY = "site-key"
    settings.RECAPTCHA_SECRET_KEY = "recaptcha-secret"
    settings.RECAPTCHA_VERIFY_URL = httpserver.url_for("/recaptcha/api/siteverify")
    settings.RECAPTCHA_HOSTNAMES = ["localhost"]
    httpserver.expect_request("/recaptcha/api/siteverify", method="POST").respond_with_json(
        {"success": True, "score": 0.9, "action": "lead_form", "challenge_ts": "2026-11-30T12:00:00Z",
         "hostname": "localhost"}
    )  # fmt: skip
    page = browser_page
    scripts = []

    def fake_recaptcha(route):
        scripts.append(route.request.url)
        route.fulfill(content_type="text/javascript", body=RECAPTCHA_STUB)

    page.route("https://www.google.com/recaptcha/**", fake_recaptcha)
    page.goto("/")
    choose_service(page, "Strategic advice")
    page.get_by_role("button", name="Next").click()
    fill_contact(page)
    page.get_by_role("button", name="Send request").click()

    expect_success(page)
    assert scripts == ["https://www.google.com/recaptcha/api.js?render=site-key"]
    [(verify, _)] = httpserver.log
    assert verify.form["response"] == "token-for-site-key-lead_form"
    assert Lead.objects.count() == 1


def test_a_ready_prototype_is_linked_from_the_thank_you(browser_page):
    page = browser_page
    answer = {"leadId": 7, "previewUrl": "https://v0.example/7", "pipedrive": {"status": "pending", "leadId": None}}
    page.route("**/api/leads", lambda route: route.fulfill(json=answer))
    page.goto("/")
    choose_service(page, "Process automation")
    page.get_by_role("button", name="Next").click()
    fill_contact(page)
    page.get_by_role("button", name="Send request").click()

    expect_success(page)
    expect(page.get_by_role("link", name="View your prototype")).to_have_attribute("href", answer["previewUrl"])
