"""reCAPTCHA v3 siteverify contract, against a local server answering with Google's documented shapes.

Shapes: https://developers.google.com/recaptcha/docs/verify and .../docs/v3.
"""

import logging
import time

import pytest
from werkzeug import Response

from integrations.recaptcha.client import (
    RECAPTCHA_ACTION_MISMATCH,
    RECAPTCHA_FAILED,
    RECAPTCHA_HOSTNAME_MISMATCH,
    RECAPTCHA_LOW_SCORE,
    RECAPTCHA_UNAVAILABLE,
    RecaptchaClient,
    client_from_settings,
)
from tests.conftest import free_port

VERIFY_PATH = "/recaptcha/api/siteverify"
POLICY = {"expected_action": "lead_form", "min_score": 0.5, "expected_hostnames": ["leads.example.com"]}


def google_answer(**overrides):
    answer = {
        "success": True,
        "challenge_ts": "2026-11-30T23:50:12Z",
        "hostname": "leads.example.com",
        "score": 0.9,
        "action": "lead_form",
    }
    answer.update(overrides)
    return answer


@pytest.fixture
def recaptcha(httpserver):
    return RecaptchaClient("s3cr3t-key", verify_url=httpserver.url_for(VERIFY_PATH), timeout_seconds=2)


def test_a_genuine_token_passes_and_is_posted_form_encoded_with_secret_and_ip(recaptcha, httpserver):
    httpserver.expect_request(VERIFY_PATH, method="POST").respond_with_json(google_answer())

    result = recaptcha.verify("token-abc", remote_ip="203.0.113.9", **POLICY)

    assert result.ok and result.error_code is None
    assert (result.score, result.action, result.hostname) == (0.9, "lead_form", "leads.example.com")
    request, _ = httpserver.log[0]
    assert request.content_type == "application/x-www-form-urlencoded"
    assert request.form.to_dict() == {"secret": "s3cr3t-key", "response": "token-abc", "remoteip": "203.0.113.9"}


def test_remote_ip_is_optional(recaptcha, httpserver):
    httpserver.expect_request(VERIFY_PATH).respond_with_json(google_answer())
    assert recaptcha.verify("token-abc", **POLICY).ok
    request, _ = httpserver.log[0]
    assert "remoteip" not in request.form


@pytest.mark.parametrize("google_code", ["invalid-input-response", "timeout-or-duplicate", "bad-request"])
def test_a_token_google_rejects_fails(recaptcha, httpserver, google_code):
    httpserver.expect_request(VERIFY_PATH).respond_with_json({"success": False, "error-codes": [google_code]})
    result = recaptcha.verify("token-abc", **POLICY)
    assert not result.ok
    assert result.error_code == RECAPTCHA_FAILED
    assert result.google_error_codes == (google_code,)


def test_a_rejected_secret_is_our_outage_not_the_visitors_fault(recaptcha, httpserver):
    httpserver.expect_request(VERIFY_PATH).respond_with_json(
        {"success": False, "error-codes": ["invalid-input-secret"]}
    )
    assert recaptcha.verify("token-abc", **POLICY).error_code == RECAPTCHA_UNAVAILABLE


def test_a_low_score_fails_and_the_threshold_itself_passes(recaptcha, httpserver):
    httpserver.expect_request(VERIFY_PATH).respond_with_json(google_answer(score=0.3))
    low = recaptcha.verify("token-abc", **POLICY)
    assert (low.ok, low.error_code, low.score) == (False, RECAPTCHA_LOW_SCORE, 0.3)

    httpserver.clear()
    httpserver.expect_request(VERIFY_PATH).respond_with_json(google_answer(score=0.5))
    assert recaptcha.verify("token-abc", **POLICY).ok


def test_a_token_minted_for_another_action_fails(recaptcha, httpserver):
    httpserver.expect_request(VERIFY_PATH).respond_with_json(google_answer(action="login"))
    assert recaptcha.verify("token-abc", **POLICY).error_code == RECAPTCHA_ACTION_MISMATCH


def test_a_token_solved_on_another_site_fails(recaptcha, httpserver):
    httpserver.expect_request(VERIFY_PATH).respond_with_json(google_answer(hostname="evil.example.net"))
    assert recaptcha.verify("token-abc", **POLICY).error_code == RECAPTCHA_HOSTNAME_MISMATCH


def test_hostnames_compare_case_insensitively_and_an_empty_list_skips_the_check(recaptcha, httpserver):
    httpserver.expect_request(VERIFY_PATH).respond_with_json(google_answer(hostname="Leads.Example.com"))
    assert recaptcha.verify("token-abc", **POLICY).ok
    assert recaptcha.verify("token-abc", **{**POLICY, "expected_hostnames": []}).ok


@pytest.mark.parametrize(
    ("patterns", "ok"),
    [([".example.com"], True), (["example.com"], False), (["*"], True), ([".example.org", "localhost"], False)],
)
def test_hostnames_take_allowed_hosts_patterns(recaptcha, httpserver, patterns, ok):
    httpserver.expect_request(VERIFY_PATH).respond_with_json(google_answer(hostname="leads.example.com"))
    assert recaptcha.verify("token-abc", **{**POLICY, "expected_hostnames": patterns}).ok is ok


def test_a_v2_answer_without_a_score_fails(recaptcha, httpserver):
    answer = google_answer()
    del answer["score"], answer["action"]
    httpserver.expect_request(VERIFY_PATH).respond_with_json(answer)
    assert recaptcha.verify("token-abc", **{**POLICY, "expected_action": ""}).error_code == RECAPTCHA_FAILED


def test_an_empty_token_fails_without_asking_google(recaptcha, httpserver):
    assert recaptcha.verify("", **POLICY).error_code == RECAPTCHA_FAILED
    assert not httpserver.log


@pytest.mark.parametrize("status", [500, 503, 429, 400])
def test_an_http_error_fails_closed_as_unavailable(recaptcha, httpserver, status):
    httpserver.expect_request(VERIFY_PATH).respond_with_data("oops", status=status)
    assert recaptcha.verify("token-abc", **POLICY).error_code == RECAPTCHA_UNAVAILABLE


def test_an_answer_that_is_not_json_fails_closed_as_unavailable(recaptcha, httpserver):
    httpserver.expect_request(VERIFY_PATH).respond_with_data("<html>maintenance</html>", content_type="text/html")
    assert recaptcha.verify("token-abc", **POLICY).error_code == RECAPTCHA_UNAVAILABLE


def test_a_slow_google_fails_closed_quickly(httpserver):
    impatient = RecaptchaClient("s3cr3t-key", verify_url=httpserver.url_for(VERIFY_PATH), timeout_seconds=0.2)

    def slow(request):
        time.sleep(0.6)  # the fake server is single-threaded: keep it short
        return Response("{}", content_type="application/json")

    httpserver.expect_request(VERIFY_PATH).respond_with_handler(slow)
    started = time.monotonic()
    assert impatient.verify("token-abc", **POLICY).error_code == RECAPTCHA_UNAVAILABLE
    assert time.monotonic() - started < 0.6


def test_an_unreachable_google_fails_closed():
    unreachable = RecaptchaClient(
        "s3cr3t-key", verify_url=f"http://127.0.0.1:{free_port()}/siteverify", timeout_seconds=1
    )
    assert unreachable.verify("token-abc", **POLICY).error_code == RECAPTCHA_UNAVAILABLE


def test_logs_carry_no_secret_token_or_ip(recaptcha, httpserver, caplog):
    httpserver.expect_request(VERIFY_PATH).respond_with_json(google_answer(score=0.1))
    with caplog.at_level(logging.DEBUG):
        recaptcha.verify("token-abc", remote_ip="203.0.113.9", **POLICY)
    logged = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("werkzeug"))
    assert "recaptcha_rejected" in logged
    for leaked in ("s3cr3t-key", "token-abc", "203.0.113.9"):
        assert leaked not in logged


def test_not_configured_without_a_secret(settings):
    settings.RECAPTCHA_SECRET_KEY = ""
    assert client_from_settings() is None


def test_configured_client_posts_to_the_configured_url(settings, httpserver):
    settings.RECAPTCHA_SECRET_KEY = "from-settings"
    settings.RECAPTCHA_VERIFY_URL = httpserver.url_for(VERIFY_PATH)
    httpserver.expect_request(VERIFY_PATH, method="POST").respond_with_json(google_answer())
    assert client_from_settings().verify("token-abc", **POLICY).ok
    assert httpserver.log[0][0].form["secret"] == "from-settings"
