"""Fixtures of the sources' webhook and admin tests: stores, sources of each kind, the Graph API stand-in,
staff. `quiet_outside` is asked for by the modules that post leads."""

from itertools import count

import pytest
from django.core.cache import cache

from sources.models import InboundSource
from standins.graph_api import ACCESS_TOKEN, GraphApi
from tests.sources.support import SECRETS, VERIFY_TOKEN

_numbers = count(1)


@pytest.fixture
def quiet_outside(settings):
    """No outside service on the request path (the rules classify), throttles fresh for every test."""
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def make_store(db):
    from stores.models import Store

    def make(name):
        n = next(_numbers)
        return Store.objects.create(
            franchise="OrangeTheory", name=name, account_id=f"src-{n}", tracking_id=f"SRC{n}",
            lead_email=f"sources{n}@otf-mail.example.com", timezone="UTC",
        )  # fmt: skip

    return make


@pytest.fixture
def downtown(make_store):
    return make_store("Downtown")


@pytest.fixture
def uptown(make_store):
    return make_store("Uptown")


@pytest.fixture
def make_source(db):
    """`make_source("typeform", store=downtown, ...)`: an active source of that kind, with its secret."""

    def make(kind, **fields):
        values = {"name": f"{kind} {next(_numbers)}", "kind": kind, "secret": SECRETS[kind]}
        if kind == "facebook":
            values |= {"verify_token": VERIFY_TOKEN, "access_token": ACCESS_TOKEN}
        return InboundSource.objects.create(**{**values, **fields})

    return make


@pytest.fixture
def graph(settings):
    """The Graph API stand-in, a real HTTP server, requiring the Facebook source's appsecret_proof."""
    with GraphApi(app_secret=SECRETS["facebook"]) as server:
        settings.FACEBOOK_GRAPH_URL = server.base_url
        yield server


@pytest.fixture
def staff(django_user_model):
    """`staff("ops", OPERATIONS, stores=[downtown])`: a staff user in those groups, assigned to those stores."""
    from django.contrib.auth.models import Group

    def make(username, *groups, stores=()):
        user = django_user_model.objects.create_user(username, is_staff=True)  # force_login: no password to hash
        user.groups.add(*[Group.objects.get(name=name) for name in groups])
        for store in stores:
            store.staff.add(user)
        return user

    return make
