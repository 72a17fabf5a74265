"""A salesperson works the outreach tasks in a real headless Chromium against the live server."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from crm.models import Task
from crm.services import lead_created_process
from foundation.staff_groups import SALES
from tests.browser import admin_login

pytestmark = pytest.mark.browser


def test_salesperson_sees_the_overdue_task_and_marks_it_done(browser_page, staff_user, make_lead, store):
    store.staff.add(staff_user("sales", SALES))
    # A lead two hours before the test runs: quiet hours would make the outcome depend on the hour.
    store.quiet_hours_end = store.quiet_hours_start
    store.save()
    late = make_lead(received_at=timezone.now() - timedelta(hours=2))
    lead_created_process(lead_id=late.pk)
    task = Task.objects.get()
    page = browser_page

    admin_login(page, "sales")
    page.locator("tr.model-task").get_by_role("link", name="Tasks").click()
    page.locator("#changelist-filter").get_by_role("link", name="Overdue", exact=True).click()
    row = page.locator("#result_list tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("b.overdue")).to_contain_text("overdue")

    row.locator('input[name="_selected_action"]').check()
    page.locator('select[name="action"]').select_option(label="Mark selected tasks done")
    page.get_by_role("button", name="Go").click()

    expect(page.locator("ul.messagelist li.success")).to_have_text("Marked 1 task(s) done.")
    expect(page.locator("#result_list")).to_have_count(0)  # nothing overdue is left
    task.refresh_from_db()
    assert (task.status, task.completed_by) == ("done", "sales")
