"""No N+1 on the back office's pages: each list page, the dashboard and the work queue run a fixed number
of queries (django_assert_max_num_queries per page), the same with 12 rows as with 2."""

import pytest
from django.urls import reverse

from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from jobs.models import Job

pytestmark = pytest.mark.django_db

# Page → most queries it may run: session, user, store scope, permissions, the page's count and rows,
# one per list filter that reads its choices (the store filter, distinct-value filters), the dashboard's figures.
PAGES = {
    "admin:crm_contact_changelist": 10,
    "admin:crm_task_changelist": 10,
    "admin:crm_timelineevent_changelist": 10,
    "admin:leadgen_lead_changelist": 10,
    "admin:tracking_emaillead_changelist": 11,
    "admin:jobs_job_changelist": 8,
    "admin:stores_store_changelist": 10,
    "admin:crm_task_queue": 7,  # and the signed-in rep's profile (the away switch)
    "admin:index": 17,
}


@pytest.mark.parametrize("page", PAGES)
def test_each_page_runs_a_fixed_number_of_queries(page, staff, client, make_email_lead, downtown, uptown,
                                                    django_assert_max_num_queries):  # fmt: skip
    def add_rows(count):
        for n in range(count):
            lead = make_email_lead(downtown if n % 2 else uptown)
            Job.objects.create(kind="crm.lead_created", key=f"crm.lead_created:{lead.pk}", status="dead", attempts=3)

    params = {"view": "due_soon"} if page == "admin:crm_task_queue" else {}
    users = [staff("store-staff", SALES, OPERATIONS, stores=[downtown]), staff("manager", SALES, OPERATIONS, MANAGERS)]
    counts = {}
    for size in (2, 12):
        add_rows(2 if size == 2 else 10)
        for user in users:
            client.force_login(user)
            with django_assert_max_num_queries(PAGES[page]) as captured:
                assert client.get(reverse(page), params).status_code == 200
            counts[user.username, size] = len(captured)
    for user in users:
        assert counts[user.username, 2] == counts[user.username, 12], counts
