"""Our clients against the stand-ins of `make run`: the reCAPTCHA one verifies as Google's siteverify does,
the CRM receiver checks Standard Webhooks signatures, and each stand-in's `settings()` alone points the
product's own clients at it."""

import base64
import json
import os
import subprocess
import sys
from contextlib import ExitStack

import pytest
from django.conf import settings as django_settings

from integrations.profile_webhook.client import ProfileWebhookClient
from integrations.recaptcha.client import (
    RECAPTCHA_ACTION_MISMATCH,
    RECAPTCHA_FAILED,
    RECAPTCHA_LOW_SCORE,
    RECAPTCHA_UNAVAILABLE,
    RecaptchaClient,
)
from jobs import PermanentError
from standins.clickup import ClickUp
from standins.crm_receiver import CrmReceiver
from standins.llm import Llm
from standins.mailgun import Mailgun
from standins.pipedrive import Pipedrive
from standins.recaptcha import SECRET_KEY, Recaptcha
from standins.v0 import V0

POLICY = {"expected_action": "lead_form", "min_score": 0.5, "expected_hostnames": ["localhost"]}


@pytest.fixture
def recaptcha():
    with Recaptcha() as google:
        yield google


def client(google: Recaptcha, secret: str = SECRET_KEY) -> RecaptchaClient:
    return RecaptchaClient(secret, verify_url=google.verify_url, timeout_seconds=2)


def test_a_fresh_token_passes_once_and_is_recorded(recaptcha):
    result = client(recaptcha).verify("token-1", remote_ip="203.0.113.9", **POLICY)
    assert (result.ok, result.score, result.action, result.hostname) == (True, 0.9, "lead_form", "localhost")

    again = client(recaptcha).verify("token-1", **POLICY)
    assert (again.error_code, again.google_error_codes) == (RECAPTCHA_FAILED, ("timeout-or-duplicate",))
    first, second = recaptcha.received()
    assert first.kind == "verification" and first.detail["success"] and first.detail["remoteip"] == "203.0.113.9"
    assert second.detail["error-codes"] == ["timeout-or-duplicate"]


def test_the_knobs_give_a_low_score_or_a_refusal(recaptcha):
    recaptcha.score = 0.2
    assert client(recaptcha).verify("token-1", **POLICY).error_code == RECAPTCHA_LOW_SCORE
    recaptcha.error_codes = ("invalid-input-response",)
    refused = client(recaptcha).verify("token-2", **POLICY)
    assert (refused.error_code, refused.google_error_codes) == (RECAPTCHA_FAILED, ("invalid-input-response",))


def test_a_wrong_secret_is_our_outage(recaptcha):
    assert client(recaptcha, "another-secret").verify("token-1", **POLICY).error_code == RECAPTCHA_UNAVAILABLE


def test_a_token_of_its_script_carries_the_action_and_hostname_it_was_made_for(recaptcha):
    # What grecaptcha.execute(siteKey, {action: "login"}) makes on a page of 127.0.0.1 (the served script).
    claims = base64.b64encode(json.dumps({"action": "login", "hostname": "127.0.0.1"}).encode()).decode()
    result = client(recaptcha).verify(f"standin.{claims}.abc", **{**POLICY, "expected_hostnames": ["127.0.0.1"]})
    assert (result.error_code, result.action, result.hostname) == (RECAPTCHA_ACTION_MISMATCH, "login", "127.0.0.1")


def test_the_crm_receiver_takes_signed_deliveries_and_refuses_a_wrong_signature():
    with CrmReceiver() as crm:
        ProfileWebhookClient(crm.url, signing_secret=crm.signing_secret).deliver({"sub": "auth0|1"}, webhook_id="job-1")
        forged = ProfileWebhookClient(crm.url, signing_secret="whsec_" + base64.b64encode(b"another key, 16+").decode())
        with pytest.raises(PermanentError, match="401"):
            forged.deliver({"sub": "auth0|2"}, webhook_id="job-2")
        assert crm.profiles == [{"sub": "auth0|1"}]
        verdicts = [(item.title, item.detail["signature"]) for item in crm.received()]
        assert verdicts == [("auth0|1", "valid"), ("auth0|2", "invalid")]


PRODUCT_CALLS = """
import django
django.setup()
from django.conf import settings
from django.core.mail import EmailMessage
from integrations.clickup import client as clickup
from integrations.llm import client as llm
from integrations.pipedrive import client as pipedrive
from integrations.profile_webhook.client import client_from_settings as crm_client
from integrations.recaptcha import client as recaptcha
from integrations.v0 import client as v0

pipedrive.client_from_settings().find_or_create_person(name="Ada Lovelace", email="ada@example.com")
clickup.client_from_settings().create_task(name="New lead: Ada Lovelace", markdown_content="**Ada**")
EmailMessage("Your request", "Thanks, Ada.", to=["ada@example.com"]).send()
assert llm.client_from_settings().classify_submission({"email": "ada@example.com"}).category == "lead"
verified = recaptcha.client_from_settings().verify(
    "token", expected_action=settings.RECAPTCHA_ACTION, min_score=0.5, expected_hostnames=settings.RECAPTCHA_HOSTNAMES
)
assert verified.ok, verified
v0.client_from_settings().create_chat(message="Build a reporting dashboard")
crm_client().deliver({"sub": "auth0|1"}, webhook_id="job-1")
"""


def test_each_standins_settings_alone_point_the_product_at_it():
    standins = [Pipedrive(), ClickUp(), Mailgun(), Llm(), Recaptcha(), V0(), CrmReceiver()]
    with ExitStack() as stack:
        env = {key: value for key, value in os.environ.items() if key != "EMAIL_BACKEND"}  # the default's choice
        for standin in standins:
            env.update(stack.enter_context(standin).settings())
        subprocess.run([sys.executable, "-c", PRODUCT_CALLS], env=env, cwd=django_settings.BASE_DIR, check=True,
                       timeout=60)  # fmt: skip
        kinds = {standin.name: [item.kind for item in standin.received()] for standin in standins}
    assert kinds == {
        "pipedrive": ["person"], "clickup": ["task"], "mailgun": ["email"], "llm": ["classification"],
        "recaptcha": ["verification"], "v0": ["chat"], "crm": ["delivery"],
    }  # fmt: skip
    [email] = standins[2].received()
    assert (email.title, email.body, email.detail["to"]) == ("Your request", "Thanks, Ada.", ["ada@example.com"])
