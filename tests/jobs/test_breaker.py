"""Circuit breaker state is shared across processes through the cache (Redis in tests)."""

import subprocess
import sys
import time

import pybreaker
import pytest

from jobs.breaker import circuit_breaker
from tests.conftest import subprocess_env


def failing():
    raise ConnectionError("database down")


@pytest.fixture
def breaker_name(request):
    return f"test-{request.node.name}"


def test_opens_after_consecutive_failures_and_is_seen_by_another_instance(breaker_name):
    breaker = circuit_breaker(breaker_name, fail_max=3, reset_timeout=60)
    for _ in range(2):
        with pytest.raises(ConnectionError):
            breaker.call(failing)
    assert breaker.current_state == pybreaker.STATE_CLOSED
    with pytest.raises(pybreaker.CircuitBreakerError):
        breaker.call(failing)

    other_worker = circuit_breaker(breaker_name, fail_max=3, reset_timeout=60)
    assert other_worker.current_state == pybreaker.STATE_OPEN
    with pytest.raises(pybreaker.CircuitBreakerError):
        other_worker.call(lambda: "never called")


@pytest.mark.django_db
def test_another_process_sees_the_open_circuit(breaker_name):
    breaker = circuit_breaker(breaker_name, fail_max=1, reset_timeout=60)
    with pytest.raises(pybreaker.CircuitBreakerError):
        breaker.call(failing)
    code = (
        "import django; django.setup();"
        "from jobs.breaker import circuit_breaker;"
        f"print(circuit_breaker({breaker_name!r}, fail_max=1, reset_timeout=60).current_state)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env(DJANGO_SETTINGS_MODULE="config.settings"),
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert result.stdout.strip().splitlines()[-1] == pybreaker.STATE_OPEN


def test_half_open_after_the_timeout_then_closes_on_success(breaker_name):
    breaker = circuit_breaker(breaker_name, fail_max=1, reset_timeout=0.2)
    with pytest.raises(pybreaker.CircuitBreakerError):
        breaker.call(failing)
    time.sleep(0.3)
    assert breaker.call(lambda: "recovered") == "recovered"
    assert circuit_breaker(breaker_name, fail_max=1, reset_timeout=0.2).current_state == pybreaker.STATE_CLOSED
