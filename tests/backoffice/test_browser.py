"""A store's salesperson and a manager use the back office in a real headless Chromium.

Screenshots go to var/screenshots/backoffice/ (BACKOFFICE_SCREENSHOTS overrides it) so a person can look.
"""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from chat.models import ChatMessage
from crm.models import Task, TimelineEvent
from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from jobs.models import Job
from leadgen.models import Lead
from tests.browser import admin_login
from tests.factories import LeadFactory

pytestmark = pytest.mark.browser

REPOSITORY = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("BACKOFFICE_SCREENSHOTS", REPOSITORY / "var/screenshots/backoffice"))


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def busy_week(make_email_lead, downtown, uptown):
    """A week of leads at both stores, some answered in time, some late, one overdue now; a dead job."""
    now = timezone.now()
    for day in range(7):
        for n in range(day % 3 + 1):
            store = downtown if n % 2 == 0 else uptown
            arrived = now - timedelta(days=day, hours=n + 1)
            lead = make_email_lead(store, received_at=arrived, recorded_at=arrived)
            if day:  # today's stay pending (and overdue)
                Task.objects.filter(source_lead=lead).update(
                    status=Task.Status.DONE, completed_at=lead.received_at + timedelta(minutes=3 + 4 * n)
                )
        LeadFactory(email=f"web{day}@example.com", status=Lead.Status.SPAM if day % 2 else Lead.Status.LEAD)
    Job.objects.create(kind="crm.lead_created", key="crm.lead_created:dead", status="dead", attempts=8)


def test_store_salesperson_opens_the_dashboard_and_works_the_queue(browser_page, staff_user, busy_week, downtown):
    ana = staff_user("ana", SALES)
    downtown.staff.add(ana)
    page = browser_page
    page.set_viewport_size({"width": 1400, "height": 900})

    admin_login(page, "ana")
    dashboard = page.locator("#backoffice-dashboard")
    expect(dashboard.locator("#dashboard-sla")).to_contain_text("overdue now")
    page.locator('select[name="days"]').select_option("7")
    page.get_by_role("button", name="Show").click()
    charts = dashboard.locator("figure.chart svg")
    expect(charts).to_have_count(2)
    assert charts.first.locator("rect.bar").count() > 0  # the chart has data points
    assert set(charts.first.locator("rect.bar").evaluate_all("rs => rs.map(r => r.dataset.series)")) == {"email"}
    expect(dashboard).not_to_contain_text("Uptown")
    expect(dashboard.locator("#dashboard-health")).to_have_count(0)  # delivery health is for Operations
    shot(page, "dashboard-store-staff")

    dashboard.get_by_role("link", name="Due soon").click()
    expect(page.locator("h1")).to_have_text("Due soon")
    overdue = page.locator("#queue tr.task.overdue")
    expect(overdue).to_have_count(1)
    expect(page.locator("#queue")).not_to_contain_text("Uptown")
    shot(page, "work-queue-due-soon")

    row = overdue.first
    row.get_by_role("textbox", name="snooze reason").fill("asked to call after 6pm")
    row.get_by_role("combobox", name="snooze for").select_option(label="4 hours")
    row.get_by_role("button", name="Snooze").click()
    expect(page.locator("ul.messagelist li.success")).to_contain_text("snoozed until")
    expect(page.locator("#queue tr.task.overdue")).to_have_count(0)
    task = Task.objects.get(status="pending", store=downtown)
    assert TimelineEvent.objects.get(event_type="task.snoozed", entity_id=str(task.pk)).new_value["by"] == "ana"

    page.locator(f'#queue tr[data-task="{task.pk}"]').get_by_role("button", name="Contacted").click()
    expect(page.locator("ul.messagelist li.success")).to_contain_text("marked contacted")
    shot(page, "work-queue-after-actions")

    page.goto(f"/admin/crm/contact/{task.contact_id}/change/")
    expect(page.locator(".field-lead_sources")).to_contain_text("Email")
    expect(page.locator("#contact-timeline")).to_contain_text("task.contacted")
    shot(page, "contact")


def test_manager_sees_every_store_and_delivery_health(browser_page, staff_user, busy_week):
    staff_user("maria", SALES, OPERATIONS, MANAGERS)
    page = browser_page
    page.set_viewport_size({"width": 1400, "height": 900})

    admin_login(page, "maria")
    dashboard = page.locator("#backoffice-dashboard")
    expect(dashboard.locator('select[name="store"]')).to_contain_text("Uptown")
    series = dashboard.locator("figure.chart svg").first.locator("rect.bar")
    assert set(series.evaluate_all("rs => rs.map(r => r.dataset.series)")) == {"email", "web_form"}
    health = dashboard.locator("#dashboard-health")
    expect(health).to_contain_text("crm.lead_created")
    expect(health).to_contain_text("tracking.lead_write")
    shot(page, "dashboard-manager")

    health.locator("a.alarm").first.click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)

    page.goto("/admin/")
    dashboard.get_by_role("link", name="overdue now").click()
    expect(page.locator("#result_list tbody tr")).not_to_have_count(0)
    expect(page.locator("#result_list b.overdue").first).to_contain_text("overdue")
    shot(page, "tasks-overdue")


def test_a_salesperson_reads_the_chat_and_the_prototype_on_the_contact_page(
    browser_page, staff_user, make_email_lead, downtown, uptown, conversation, completed_prototype
):
    ana = staff_user("ana", SALES)
    downtown.staff.add(ana)
    lead = make_email_lead(downtown, first_name="Maya", last_name="Lopez")
    conversation(
        "chat-maya",
        lead,
        [
            ("Hi! Do you have evening classes?", "Yes: every weekday until 9pm, and Saturdays until 2pm.",
             ChatMessage.State.COMPLETE),
            ("Great, can you book me a trial on Thursday?", "I can book that for you. Which time",
             ChatMessage.State.PARTIAL),
        ],
    )  # fmt: skip
    prototype = completed_prototype(lead, "https://v0.example.dev/preview/maya")
    other = make_email_lead(uptown)
    conversation("chat-uptown", other, [("Uptown only", "Uptown answer", ChatMessage.State.COMPLETE)])
    contact = Task.objects.get(source_lead=lead).contact
    page = browser_page
    page.set_viewport_size({"width": 1400, "height": 900})

    admin_login(page, "ana")
    prototypes = page.locator("#backoffice-dashboard #dashboard-prototypes-chats")
    expect(prototypes.locator("#prototypes-completed b")).to_have_text("1")
    expect(prototypes.locator("#chats-with-lead b")).to_have_text("1")  # a store's staff: their leads' chats
    expect(page.locator("#dashboard-funnel")).to_contain_text("1 Prototype completed")
    shot(page, "dashboard-store-staff-prototypes-chats")
    page.goto(f"/admin/crm/contact/{contact.pk}/change/")
    messages = page.locator("#contact-chats tr.message")
    expect(messages).to_have_count(4)
    expect(messages.nth(0)).to_contain_text("visitor")
    expect(messages.nth(0)).to_contain_text("evening classes")
    expect(messages.nth(3)).to_contain_text("assistant")
    expect(messages.nth(3).locator("td.state")).to_have_text("Partial")
    expect(page.locator("#contact-chats")).not_to_contain_text("Uptown")
    row = page.locator(f'#contact-prototypes tr[data-prototype="{prototype.pk}"]')
    expect(row.locator("a.preview")).to_have_attribute("href", "https://v0.example.dev/preview/maya")
    shot(page, "contact-chat-and-prototype")

    row.get_by_role("link", name="Completed").click()
    expect(page.locator("h1")).to_contain_text("prototype")
    expect(page.locator(".field-preview")).to_contain_text("open")
