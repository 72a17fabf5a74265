"""A salesperson finds a likely duplicate and merges it, in a real headless Chromium against the live server."""

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from crm import merge
from crm.models import Contact, Task, TimelineEvent
from foundation.staff_groups import SALES
from tests.browser import admin_login

pytestmark = pytest.mark.browser

NOON = datetime(2026, 6, 10, 16, 0, tzinfo=UTC)


def test_salesperson_reviews_the_preview_picks_a_value_and_merges(browser_page, staff_user, store):
    store.staff.add(staff_user("sales", SALES))
    older = Contact.objects.create(store=store, email="ada@example.com", first_name="Ada")
    Contact.objects.filter(pk=older.pk).update(created_at=NOON - timedelta(days=3))
    newer = Contact.objects.create(
        store=store, email="Ada+web@Example.com", phone="+14155550132", first_name="Adaline", last_name="Byron"
    )
    task = Task.objects.create(
        contact=newer, store=store, task_type="lead_outreach", type_category="lead_outreach", due_at=NOON
    )
    page = browser_page

    admin_login(page, "sales")
    page.locator("tr.model-contact").get_by_role("link", name="Contacts").click()
    page.get_by_role("link", name="Possible duplicates").click()
    pair = page.locator("#duplicates tr.pair")
    expect(pair).to_have_count(1)
    expect(pair.locator("td.why")).to_have_text("same email")
    pair.get_by_role("link", name="Review merge").click()

    expect(page.locator("#merge-summary")).to_contain_text(f"#{older.pk}")
    first_name = page.locator("#merge-fields tr.field-first_name")
    expect(first_name.locator('input[value="survivor"]')).to_be_checked()  # the older contact's by default
    expect(page.locator('#merge-fields tr.field-last_name input[value="other"]')).to_be_checked()  # it had none
    expect(page.locator("#merge-moves")).to_contain_text("1 task;")
    first_name.get_by_label("Adaline").check()
    page.get_by_role("button", name="Merge").click()

    expect(page.locator("ul.messagelist li.success")).to_have_text(
        f"Merged contact #{newer.pk} into #{older.pk}; moved 1 task."
    )
    assert page.url.endswith(f"/admin/crm/contact/{older.pk}/change/")
    survivor = Contact.objects.get()
    assert (survivor.pk, survivor.first_name, survivor.last_name, survivor.phone, survivor.email) == (
        older.pk, "Adaline", "Byron", "+14155550132", "ada@example.com",
    )  # fmt: skip
    task.refresh_from_db()
    assert task.contact_id == older.pk
    merged = TimelineEvent.objects.get(event_type=merge.CONTACT_MERGED_EVENT)
    assert (merged.contact_id, merged.entity_id, merged.new_value["by"]) == (older.pk, str(newer.pk), "sales")
