"""Duration settings are refused at startup unless they make sense (found in the time audit:
QUOTE_TTL_SECONDS=0 expired every quote before a payment could use it,
IDEMPOTENCY_KEY_TTL_SECONDS=0 forgot every key, a huge one overflowed on every quote)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _start(**variables: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env |= variables | {"DJANGO_SETTINGS_MODULE": "config.settings"}
    code = "import django; django.setup(); print('started')"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("QUOTE_TTL_SECONDS", "0"),
        ("QUOTE_TTL_SECONDS", "-900"),
        ("QUOTE_TTL_SECONDS", "1000000000000"),
        ("PROVIDER_TIMEOUT_SECONDS", "0"),
        ("PROVIDER_POLL_AFTER_SECONDS", "0"),
        ("IDEMPOTENCY_KEY_TTL_SECONDS", "0"),
        ("IDEMPOTENCY_LOCK_TIMEOUT_SECONDS", "-1"),
        ("WEBHOOK_TIMEOUT_SECONDS", "0"),
        ("WEBHOOK_RETRY_SCHEDULE", "60,-300,900"),
        ("KYC_REVIEW_DELAY_SECONDS", "-1"),
        ("LOGIN_FAILURE_WINDOW_SECONDS", "0"),
        ("DASHBOARD_SESSION_SECONDS", "0"),
    ],
)
def test_a_duration_that_makes_no_sense_is_refused_at_startup(variable, value):
    result = _start(**{variable: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"Set {variable} to a number of seconds" in result.stderr


@pytest.mark.parametrize("schedule", ["60,300,900", "60,300,900,3600,14400,43200,86400"])
def test_a_retry_schedule_of_other_than_six_delays_is_refused_at_startup(schedule):
    """docs/webhooks.md: a delivery fails after its seventh attempt, six retries."""
    result = _start(WEBHOOK_RETRY_SCHEDULE=schedule)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "Set WEBHOOK_RETRY_SCHEDULE to six delays" in result.stderr


@pytest.mark.parametrize(
    "variables",
    [
        {},
        {"PROVIDER_SIMULATION_DELAY_SECONDS": "0", "KYC_REVIEW_DELAY_SECONDS": "0"},
        {"WEBHOOK_RETRY_SCHEDULE": "1,1,1,1,1,1", "QUOTE_TTL_SECONDS": "1"},
    ],
)
def test_sensible_durations_start(variables):
    result = _start(**variables)
    assert result.returncode == 0, result.stderr
    assert "started" in result.stdout


@pytest.mark.parametrize(
    ("variable", "value", "lowest"),
    [
        ("LOGIN_FAILURES_PER_USERNAME", "0", 1),  # every login refused
        ("LOGIN_FAILURES_PER_ADDRESS", "-5", 1),
        ("TRUSTED_PROXY_COUNT", "-1", 0),
    ],
)
def test_a_login_limit_that_makes_no_sense_is_refused_at_startup(variable, value, lowest):
    result = _start(**{variable: value})
    assert result.returncode != 0
    assert f"Set {variable} to {lowest} or more (it is {value})" in result.stderr
