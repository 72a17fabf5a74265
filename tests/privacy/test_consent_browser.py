"""The lead form shows its consent, will not send without it, and the lead records what the page showed."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from leadgen.consent import CONSENT_TEXT, CONSENT_VERSION
from leadgen.models import Lead

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", "var/screenshots"))


def to_contact_details(page):
    page.goto("/")
    page.get_by_role("radio", name="Strategic advice").check()
    page.get_by_role("button", name="Next").click()
    page.get_by_role("button", name="Next").click()
    page.get_by_label("First name").fill("Grace")
    page.get_by_label("Work email").fill("grace@hopper.example")


def test_the_form_shows_the_consent_with_its_version_and_the_lead_records_it(browser_page):
    page = browser_page
    to_contact_details(page)
    consent = page.get_by_role("checkbox", name=CONSENT_TEXT)
    expect(consent).to_be_visible()
    expect(consent).not_to_be_checked()
    expect(consent).to_have_accessible_description(f"Consent version {CONSENT_VERSION}")

    page.get_by_role("button", name="Send request").click()
    expect(consent).to_be_focused()
    expect(consent).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#field-consent-error")).to_have_text(
        "Tick this box so that we may keep your details to answer you."
    )
    expect(page.get_by_role("alert")).to_have_text("Please correct the highlighted fields.")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "lead-form-consent-missing.png", full_page=True)
    assert not Lead.objects.exists()

    consent.check()
    expect(consent).not_to_have_attribute("aria-invalid", "true")  # ticking it clears the error
    page.screenshot(path=SCREENSHOTS / "lead-form-consent.png", full_page=True)
    page.get_by_role("button", name="Send request").click()

    expect(page.get_by_role("heading", name="Thank you, Grace!")).to_be_focused()
    lead = Lead.objects.get()
    assert (lead.consent_version, lead.consent_text) == (CONSENT_VERSION, CONSENT_TEXT)
    assert lead.consented_at is not None


def test_a_page_whose_consent_text_was_altered_is_refused_next_to_the_box(browser_page):
    page = browser_page
    to_contact_details(page)
    # What an altered page (or a script posting on its own) would claim the person agreed to.
    page.locator("#field-consent-text").evaluate("label => { label.textContent = 'I agree to nothing.'; }")
    page.get_by_role("checkbox", name="I agree to nothing.").check()
    page.get_by_role("button", name="Send request").click()

    consent = page.get_by_role("checkbox", name="I agree to nothing.")
    expect(consent).to_have_accessible_description(
        f"Consent version {CONSENT_VERSION} This is not the text of that version of the consent."
    )
    expect(consent).to_be_focused()
    assert not Lead.objects.exists()
