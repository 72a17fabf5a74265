"""Store-level isolation on every admin page: a store's staff see and change only their stores' rows.

Lists, search, filter choices, detail pages (another store's id is a 404), history, CSV export, actions,
autocomplete, forms, the work queue and the dashboard. Managers (the every-store permission) see everything.
"""

import csv
import io

import pytest
from django.urls import reverse

from chat.models import ChatSession
from crm.models import Contact, Task, TimelineEvent
from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from prototypes.models import Prototype
from stores.models import Store
from tests.factories import LeadFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(make_email_lead, downtown, uptown, staff, client, conversation, completed_prototype):
    mine = make_email_lead(downtown, first_name="Mine")
    theirs = make_email_lead(uptown, first_name="Theirs")
    for lead in (mine, theirs):
        conversation(f"chat-{lead.first_name}", lead, [("Hello", "Hi", "complete")])
        completed_prototype(lead, f"https://v0.example.dev/preview/{lead.pk}")
    web = LeadFactory(email="web@example.com", first_name="Web")  # no store
    ana = staff("ana", SALES, stores=[downtown])
    client.force_login(ana)
    return {"mine": mine, "theirs": theirs, "web": web, "client": client, "ana": ana}


ROWS = {
    # admin URL name prefix → how to get the row of a lead
    "crm_contact": lambda lead: Contact.objects.get(phone=lead.phone),
    "crm_task": lambda lead: Task.objects.get(source_lead=lead),
    "crm_timelineevent": lambda lead: TimelineEvent.objects.get(entity_id=str(lead.pk)),
    "leadgen_lead": lambda lead: lead,
    "tracking_emaillead": lambda lead: lead,
    "stores_store": lambda lead: lead.store,
    "chat_chatsession": lambda lead: ChatSession.objects.get(lead=lead),
    "prototypes_prototype": lambda lead: Prototype.objects.get(lead=lead),
}


@pytest.mark.parametrize("admin_name", ROWS)
def test_lists_show_only_the_users_stores(world, admin_name):
    mine, theirs = ROWS[admin_name](world["mine"]), ROWS[admin_name](world["theirs"])
    listing = world["client"].get(reverse(f"admin:{admin_name}_changelist"))
    assert listing.status_code == 200
    shown = set(listing.context["cl"].result_list)
    assert mine in shown and theirs not in shown
    if admin_name == "leadgen_lead":
        assert world["web"] not in shown  # a web-form lead has no store: not a store's to see


@pytest.mark.parametrize("admin_name", ROWS)
def test_another_stores_row_is_a_404_on_every_object_url(world, admin_name):
    theirs = ROWS[admin_name](world["theirs"])
    for view in ("change", "history"):
        response = world["client"].get(reverse(f"admin:{admin_name}_{view}", args=[theirs.pk]))
        assert response.status_code == 404, (admin_name, view)
    mine = ROWS[admin_name](world["mine"])
    assert world["client"].get(reverse(f"admin:{admin_name}_change", args=[mine.pk])).status_code == 200


@pytest.mark.parametrize(
    ("admin_name", "term"),
    [("crm_contact", "phone"), ("crm_task", "phone"), ("leadgen_lead", "email"), ("tracking_emaillead", "phone")],
)
def test_search_finds_nothing_of_another_store(world, admin_name, term):
    theirs = getattr(world["theirs"], term)
    listing = world["client"].get(reverse(f"admin:{admin_name}_changelist"), {"q": theirs})
    assert list(listing.context["cl"].result_list) == []


STORE_FILTERED = ["crm_contact", "crm_task", "crm_timelineevent", "leadgen_lead", "tracking_emaillead"]


@pytest.mark.parametrize("admin_name", STORE_FILTERED)
def test_the_store_filter_offers_only_the_users_stores_and_a_guessed_one_shows_nothing(
    world, admin_name, uptown, make_store
):
    midtown = make_store("Midtown")
    midtown.staff.add(world["ana"])  # two stores of hers: the filter has something to offer
    listing = world["client"].get(reverse(f"admin:{admin_name}_changelist"))
    store_filter = next(spec for spec in listing.context["cl"].filter_specs if spec.title == "store")
    assert [name for _, name in store_filter.lookup_choices] == [str(world["mine"].store), str(midtown)]
    guessed = world["client"].get(reverse(f"admin:{admin_name}_changelist"), {"store__id__exact": uptown.pk})
    assert list(guessed.context["cl"].result_list) == []


@pytest.mark.parametrize(
    ("admin_name", "resource"), [("crm_contact", "contact"), ("crm_task", "task"), ("leadgen_lead", "lead")]
)
def test_csv_export_holds_only_the_users_stores(world, admin_name, resource):
    fields = {"crm_contact": "phone", "crm_task": "contact__phone", "leadgen_lead": "phone"}
    column = fields[admin_name]
    response = world["client"].post(
        reverse(f"admin:{admin_name}_export"), {"format": "0", "resource": "0", f"{resource}resource_{column}": "on"}
    )
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    phones = {row[next(iter(row))] for row in rows}
    assert world["mine"].phone in phones and world["theirs"].phone not in phones


def test_actions_never_reach_another_stores_task(world):
    theirs = Task.objects.get(source_lead=world["theirs"])
    mine = Task.objects.get(source_lead=world["mine"])
    selected = [str(theirs.pk), str(mine.pk)]
    world["client"].post(reverse("admin:crm_task_changelist"), {"action": "mark_done", "_selected_action": selected})
    theirs.refresh_from_db()
    mine.refresh_from_db()
    assert (mine.status, theirs.status) == ("done", "pending")


def test_work_queue_shows_and_acts_only_within_the_users_stores(world):
    theirs = Task.objects.get(source_lead=world["theirs"])
    for view in ("mine", "due_soon"):
        page = world["client"].get(reverse("admin:crm_task_queue"), {"view": view})
        assert str(theirs.pk) not in page.content.decode()
    response = world["client"].post(
        reverse("admin:crm_task_queue_act", args=[theirs.pk]), {"action": "done", "seen": theirs.updated_at.isoformat()}
    )
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "pending"


def test_autocomplete_and_the_task_form_offer_only_the_users_contacts(world):
    theirs = Contact.objects.get(phone=world["theirs"].phone)
    found = world["client"].get(
        reverse("admin:autocomplete"),
        {"app_label": "crm", "model_name": "task", "field_name": "contact", "term": ""},
    ).json()
    assert [row["text"] for row in found["results"]] == [str(Contact.objects.get(phone=world["mine"].phone))]
    # A forged POST naming another store's contact is refused by the form.
    response = world["client"].post(
        reverse("admin:crm_task_add"),
        {"contact": theirs.pk, "type_category": "lead_outreach", "status": "pending", "priority": "normal",
         "due_at_0": "2026-06-10", "due_at_1": "12:00", "suggested_actions": "[]"},
    )  # fmt: skip
    assert response.status_code == 200 and "contact" in response.context["adminform"].form.errors
    assert Task.objects.filter(contact=theirs).count() == 1


def test_dashboard_figures_cover_only_the_users_stores_even_when_another_is_asked_for(world, uptown):
    page = world["client"].get(reverse("admin:index"), {"days": "90", "store": uptown.pk})
    context = page.context
    assert [store.pk for store in context["stores"]] == [world["mine"].store_id]
    assert context["store"] is None  # a store the user may not see is not chosen
    # The leads were recorded now: one is the user's store's, one the other store's, one has no store.
    received, _ = context["funnel"][0]
    assert received.count == 1


def test_managers_see_every_store(world, staff, client):
    client.force_login(staff("boss", SALES, MANAGERS))
    shown = set(client.get(reverse("admin:crm_contact_changelist")).context["cl"].result_list)
    assert shown == set(Contact.objects.all())
    theirs = Task.objects.get(source_lead=world["theirs"])
    assert client.get(reverse("admin:crm_task_change", args=[theirs.pk])).status_code == 200
    page = client.get(reverse("admin:index"), {"days": "90"})
    assert page.context["funnel"][0][0].count == 3
    ops = staff("ops", OPERATIONS, MANAGERS)
    client.force_login(ops)
    stores = client.get(reverse("admin:stores_store_changelist")).context["cl"].result_list
    assert set(stores) == set(Store.objects.all())
