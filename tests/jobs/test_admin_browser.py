"""An operator works the jobs admin in a real headless Chromium against the live server."""

import re

import pytest
from playwright.sync_api import expect

import jobs
from foundation.staff_groups import MANAGERS, OPERATIONS
from jobs import runtime
from jobs.models import Job
from tests.browser import admin_login

pytestmark = pytest.mark.browser


@pytest.fixture
def operator(staff_user):
    return staff_user("ops", OPERATIONS, MANAGERS)


def open_jobs(page):
    page.locator("tr.model-job").get_by_role("link", name="Jobs").click()
    expect(page.locator("h1")).to_have_text("Select job to change")


def test_operator_replays_a_dead_job(browser_page, operator):
    page = browser_page
    dead = jobs.enqueue("tests.permanent", {}, key="order:1:confirmation")
    runtime.job_run(job_id=dead.pk)
    other = jobs.enqueue("tests.permanent", {}, key="order:2:confirmation")
    runtime.job_run(job_id=other.pk)

    admin_login(page, "ops")
    open_jobs(page)
    page.locator('#changelist-filter details[data-filter-title="status"]').get_by_role("link", name="Dead").click()
    expect(page).to_have_url(re.compile(r"status__exact=dead"))
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(2)  # the pending dead-letter alerts are filtered out

    page.locator(f'input[name="_selected_action"][value="{dead.pk}"]').check()
    page.locator('select[name="action"]').select_option(label="Replay selected dead or skipped jobs")
    page.get_by_role("button", name="Go").click()

    expect(page.locator("h1")).to_have_text("Replay jobs?")
    expect(page.locator("#content")).to_contain_text(f"#{dead.pk} tests.permanent [order:1:confirmation] — dead")
    expect(page.locator("#content")).not_to_contain_text("order:2:confirmation")
    assert Job.objects.get(pk=dead.pk).status == Job.Status.DEAD, "nothing happens before the confirmation"
    page.get_by_role("button", name="Yes, I'm sure").click()

    expect(page.locator("ul.messagelist li.success")).to_have_text("Replayed 1 job(s).")
    dead.refresh_from_db()
    other.refresh_from_db()
    assert dead.status == Job.Status.PENDING and dead.last_error == "replayed by ops"
    assert other.status == Job.Status.DEAD


def test_operator_sends_a_test_job(browser_page, operator):
    page = browser_page
    admin_login(page, "ops")
    open_jobs(page)
    page.get_by_role("button", name="Send test job").click()

    expect(page).to_have_url(re.compile(r"/admin/jobs/job/\d+/change/$"))
    ping = Job.objects.get(kind="jobs.ping")
    assert page.url.endswith(f"/admin/jobs/job/{ping.pk}/change/")
    expect(page.locator("ul.messagelist li.success")).to_contain_text(f"Test job #{ping.pk} sent")
    expect(page.locator(".field-kind .readonly")).to_have_text("jobs.ping")
