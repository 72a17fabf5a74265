"""The sources admin as Operations uses it: sources with write-only secrets and a mapping preview, the request
log with masked bodies and its replay, both limited to the user's stores."""

import json

import pytest
from django.urls import reverse

from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from leadgen.models import Lead
from sources.models import InboundRequest, InboundSource
from standins import platforms as standin
from standins.graph_api import lead
from tests.sources.support import SECRETS, post, replay, run_jobs, signed, source_form

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quiet_outside")]

ADD_URL = reverse("admin:sources_inboundsource_add")
SOURCES_URL = reverse("admin:sources_inboundsource_changelist")
LOG_URL = reverse("admin:sources_inboundrequest_changelist")
PERSONAL = [standin.PERSON["email"], standin.PERSON["last_name"], standin.PERSON["phone"], standin.PERSON["company"]]


def change_url(source):
    return reverse("admin:sources_inboundsource_change", args=[source.pk])


def log_url(logged):
    return reverse("admin:sources_inboundrequest_change", args=[logged.pk])


@pytest.fixture
def ops(client, staff, downtown):
    client.force_login(staff("ops", OPERATIONS, stores=[downtown]))
    return client


def test_operations_adds_a_source_and_its_secrets_are_never_shown_back(ops, downtown):
    secrets = {"secret": "app-secret-1d2c3b", "verify_token": "verify-9e8f", "access_token": "EAAGpage-token-77"}
    form = {"name": "Spring campaign", "kind": "facebook", "store": downtown.pk, "is_active": "on",
            "default_service_type": "", "field_mapping": "{}", **secrets}  # fmt: skip
    assert ops.post(ADD_URL, form).status_code == 302
    source = InboundSource.objects.get()
    assert (source.secret, source.verify_token, source.access_token) == tuple(secrets.values())

    for url in (change_url(source), SOURCES_URL, f"{change_url(source)}history/"):
        page = ops.get(url).content.decode()
        assert not [value for value in secrets.values() if value in page], url
    page = ops.get(change_url(source)).content.decode()
    assert "<div>Secret: set</div>" in page and "<div>Verify token: set</div>" in page
    assert f"/api/sources/{source.public_id}/webhook" in page, "the webhook URL to give the platform"

    # Saved again without retyping them: blank keeps each stored secret.
    assert ops.post(change_url(source), source_form(source, name="Spring campaign 2")).status_code == 302
    source.refresh_from_db()
    assert (source.name, source.secret, source.access_token) == ("Spring campaign 2", secrets["secret"],
                                                                 secrets["access_token"])  # fmt: skip

    # A new value replaces the stored one.
    ops.post(change_url(source), source_form(source, access_token="EAAGnew-token"))
    source.refresh_from_db()
    assert (source.access_token, source.secret) == ("EAAGnew-token", secrets["secret"])


def test_the_secrets_status_says_set_or_not_set(ops, make_source, downtown):
    source = make_source("facebook", store=downtown, access_token="")
    page = ops.get(change_url(source)).content.decode()
    assert "<div>Secret: set</div>" in page and "<div>Page access token: not set</div>" in page


def test_a_mapping_or_secret_the_source_cannot_use_is_refused_with_the_reason(ops, make_source, downtown):
    source = make_source("generic", store=downtown)
    response = ops.post(change_url(source), source_form(source, field_mapping='{"email": "contact[", "shoe": "x"}'))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "field_mapping" in errors and "shoe" in str(errors) and "email" in str(errors)

    response = ops.post(change_url(source), source_form(source, secret="whsec_!!!"))
    assert "secret" in response.context["adminform"].form.errors
    source.refresh_from_db()
    assert source.secret == SECRETS["generic"] and source.field_mapping == {}


def test_the_mapping_preview_shows_what_each_field_gets_masked_on_the_last_lead(ops, make_source, downtown):
    source = make_source("google_ads", store=downtown, field_mapping={"message": "WHAT_IS_YOUR_BUDGET"})
    columns = {"FULL_NAME": "Ada Lovelace", "EMAIL": "ada@example.com", "WHAT_IS_YOUR_BUDGET": "Around 20k"}
    post(ops, source, signed("google_ads", columns=columns))

    page = ops.get(change_url(source)).content.decode()
    assert "<td>email</td><td>••• (15 characters)</td>" in page
    assert "<td>message</td><td>••• (10 characters)</td>" in page
    assert "<td>phone</td><td>—</td>" in page
    assert "FULL_NAME, EMAIL, WHAT_IS_YOUR_BUDGET" in page, "the keys a mapping can name"
    assert not [value for value in ("ada@example.com", "Lovelace", "Around 20k") if value in page]


def test_the_preview_of_a_facebook_source_reads_the_lead_graph_answered(ops, make_source, downtown, graph):
    source = make_source("facebook", store=downtown)
    graph.add(lead("500000000000001", {"full_name": "Ada Lovelace", "email": "ada@example.com",
                                       "which_service?": "Automation"}))  # fmt: skip
    post(ops, source, signed("facebook", leadgen_ids=["500000000000001"]))
    run_jobs()
    page = ops.get(change_url(source)).content.decode()
    assert "full_name, email, which_service?" in page and "<td>first_name</td><td>••• (3 characters)</td>" in page
    assert "ada@example.com" not in page


def test_the_request_log_shows_the_body_masked_and_the_ids(ops, make_source, downtown):
    source = make_source("typeform", store=downtown)
    sent = signed("typeform", token="resp-token-31", form_id="Fm42")
    post(ops, source, sent)
    logged = InboundRequest.objects.get()

    page = ops.get(log_url(logged)).content.decode()
    assert not [value for value in PERSONAL if value in page]
    assert "&quot;form_id&quot;: &quot;Fm42&quot;" in page and "&quot;ref&quot;: &quot;email&quot;" in page
    assert "•••" in page and "typeform-signature" in page.lower()
    listing = ops.get(LOG_URL).content.decode()
    assert "resp-token-31" in listing and not [value for value in PERSONAL if value in listing]


def test_a_google_key_never_reaches_the_log(ops, make_source, downtown):
    source = make_source("google_ads", store=downtown)
    post(ops, source, signed("google_ads"))
    logged = InboundRequest.objects.get()
    assert SECRETS["google_ads"] not in logged.body
    assert SECRETS["google_ads"] not in ops.get(log_url(logged)).content.decode()


def test_staff_see_and_replay_only_their_stores_sources_and_requests(client, staff, make_source, downtown, uptown):
    mine = make_source("generic", store=downtown, field_mapping={"email": "contact"}, name="Mine")
    also_mine = make_source("typeform", store=downtown, name="Mine too")
    theirs = make_source("generic", store=uptown, field_mapping={"email": "contact"})
    nobodys = make_source("generic", name="No store")
    for source in (mine, theirs, nobodys):
        post(client, source, signed("generic", payload={"contact": {"mail": "ada@example.com"}, "first_name": "Ada"}))
    my_request, their_request, nobodys_request = InboundRequest.objects.order_by("pk")

    client.force_login(staff("ops", OPERATIONS, stores=[downtown]))
    assert list(client.get(SOURCES_URL).context["cl"].result_list) == [mine, also_mine]
    assert list(client.get(LOG_URL).context["cl"].result_list) == [my_request]
    for url in (change_url(theirs), change_url(nobodys), log_url(their_request), log_url(nobodys_request)):
        assert client.get(url).status_code == 404, url
    source_filter = next(
        spec for spec in client.get(LOG_URL).context["cl"].filter_specs if spec.title == "source"
    )  # fmt: skip
    assert [name for _, name in source_filter.lookup_choices] == [str(mine), str(also_mine)]
    form = client.get(ADD_URL).context["adminform"].form
    assert list(form.fields["store"].queryset) == [downtown]

    # A forged replay of another store's requests reaches nothing: the action starts from the user's rows.
    for source in (theirs, nobodys):
        source.field_mapping = {"email": "contact.mail"}
        source.save()
    replay(client, their_request, nobodys_request)
    assert not Lead.objects.exists()

    managers = staff("manager", OPERATIONS, MANAGERS)
    client.force_login(managers)
    assert set(client.get(LOG_URL).context["cl"].result_list) == {my_request, their_request, nobodys_request}


def test_sales_do_not_see_sources_and_only_a_replay_permission_replays(client, staff, make_source, downtown):
    source = make_source("generic", store=downtown, field_mapping={"email": "contact"})
    post(client, source, signed("generic", payload={"contact": {"mail": "ada@example.com"}, "first_name": "Ada"}))
    logged = InboundRequest.objects.get()
    source.field_mapping = {"email": "contact.mail"}
    source.save()

    client.force_login(staff("sales", SALES, stores=[downtown]))
    assert client.get(SOURCES_URL).status_code == 403 and client.get(LOG_URL).status_code == 403

    viewer = staff("viewer", stores=[downtown])
    viewer.user_permissions.add(*_permissions("view_inboundrequest"))
    client.force_login(viewer)
    assert client.get(LOG_URL).status_code == 200
    replay(client, logged)
    logged.refresh_from_db()
    assert logged.outcome == "unreadable" and not Lead.objects.exists()

    client.force_login(staff("ops", OPERATIONS, stores=[downtown]))
    response = replay(client, logged)
    assert response.status_code == 302
    logged.refresh_from_db()
    assert logged.outcome == "created" and Lead.objects.count() == 1


def test_a_request_refused_for_its_signature_is_not_replayed(ops, make_source, downtown):
    source = make_source("generic", store=downtown)
    post(ops, source, signed("generic", secret=standin.standard_webhooks_secret()))
    logged = InboundRequest.objects.get()
    replay(ops, logged)
    logged.refresh_from_db()
    assert logged.outcome == "refused_signature" and not Lead.objects.exists()
    page = ops.get(log_url(logged)).content.decode()
    assert "Not kept: the signature did not hold." in page and json.dumps(logged.errors) != "{}"


def _permissions(*codenames):
    from django.contrib.auth.models import Permission

    return Permission.objects.filter(content_type__app_label="sources", codename__in=codenames)
