"""The client IP is what our outermost trusted proxy saw: stored on the lead, counted by the throttles."""

import json

import pytest
from django.core.cache import cache
from rest_framework.throttling import ScopedRateThrottle

from leadgen.models import Lead
from tests.conftest import minute_with_time_left

pytestmark = pytest.mark.django_db

CLIENT = "198.51.100.9"


def submission(email="ada@analytical.example"):
    return {
        "firstName": "Ada", "lastName": "Lovelace", "email": email, "company": "Analytical Engines",
        "message": "We want to automate our quote-to-cash process.", "serviceType": "strategic_advice",
    }  # fmt: skip


def post_lead(client, *, remote, forwarded=None, email="ada@analytical.example"):
    headers = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    return client.post("/api/leads", json.dumps(submission(email)), content_type="application/json", **headers)


@pytest.fixture(autouse=True)
def intake(settings):
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""
    cache.clear()


@pytest.mark.parametrize(
    ("proxies", "remote", "forwarded", "expected"),
    [
        (0, CLIENT, None, CLIENT),
        (0, CLIENT, "6.6.6.6", CLIENT),  # reached directly: the header is the client's own words
        (1, "10.0.0.2", CLIENT, CLIENT),
        (1, "10.0.0.2", f"6.6.6.6, {CLIENT}", CLIENT),  # a spoofed entry left of what the proxy appended
        (2, "10.0.0.3", f"{CLIENT}, 10.0.0.2", CLIENT),
        (2, "10.0.0.3", f"6.6.6.6, 7.7.7.7, {CLIENT}, 10.0.0.2", CLIENT),
        (1, "10.0.0.2", "2001:db8::1", "2001:db8::1"),
        (1, "10.0.0.2", "not-an-address", None),
    ],
)
def test_the_lead_keeps_the_address_the_trusted_proxies_saw(client, settings, proxies, remote, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = proxies
    response = post_lead(client, remote=remote, forwarded=forwarded)
    assert response.status_code == 200, response.content
    assert Lead.objects.get(public_id=response.json()["leadId"]).client_ip == expected


def test_a_longer_forwarded_header_does_not_buy_a_fresh_rate_limit(client, settings, monkeypatch):
    settings.TRUSTED_PROXY_COUNT = 1
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "leads", "2/min")
    minute_with_time_left()
    statuses = [
        post_lead(client, remote="10.0.0.2", forwarded=f"{spoof}, {CLIENT}", email=f"u{n}@example.com").status_code
        for n, spoof in enumerate(["1.1.1.1", "2.2.2.2", "3.3.3.3"])
    ]
    assert statuses == [200, 200, 429]
    other = post_lead(client, remote="10.0.0.2", forwarded="198.51.100.10", email="other@example.com")
    assert other.status_code == 200, "another client has its own allowance"


def test_ipv6_clients_are_throttled_per_64(client, settings, monkeypatch):
    settings.TRUSTED_PROXY_COUNT = 0
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "leads", "2/min")
    minute_with_time_left()
    statuses = [
        post_lead(client, remote=f"2001:db8:1:2::{n:x}", email=f"u{n}@example.com").status_code for n in (1, 2, 3)
    ]
    assert statuses == [200, 200, 429], "one /64 is one subscriber"
    assert post_lead(client, remote="2001:db8:1:3::1", email="next@example.com").status_code == 200
