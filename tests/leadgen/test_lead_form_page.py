"""The lead form page at `/` as the server renders it."""

import pytest
from django.urls import reverse

from leadgen.models import Lead

pytestmark = pytest.mark.django_db


def test_the_form_page_offers_every_service_type_and_loads_no_recaptcha_without_a_site_key(client, settings):
    settings.RECAPTCHA_SITE_KEY = ""
    response = client.get(reverse("lead-form"))
    assert response.status_code == 200
    page = response.content.decode()
    assert '<form id="lead-form"' in page and f'action="{reverse("leads-create")}"' in page
    for value in Lead.ServiceType.values:
        assert f'name="serviceType" value="{value}"' in page
    assert 'name="serviceType" value=""' in page, "Something else"
    for field in ("firstName", "lastName", "email", "phone", "company", "message"):
        assert f'name="{field}"' in page and f'<label for="field-{field}"' in page
    assert "leadgen/lead_form.js" in page
    assert "www.google.com/recaptcha" not in page and 'data-recaptcha-site-key=""' in page


def test_with_a_site_key_the_page_loads_recaptcha_v3_for_it(client, settings):
    settings.RECAPTCHA_SITE_KEY = "site-key"
    settings.RECAPTCHA_ACTION = "lead_form"
    page = client.get("/").content.decode()
    assert '<script src="https://www.google.com/recaptcha/api.js?render=site-key" async defer></script>' in page
    assert 'data-recaptcha-site-key="site-key" data-recaptcha-action="lead_form"' in page
