"""config.settings_production refuses to start on the embedded defaults of `make run`."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent

REQUIRED = {
    "SECRET_KEY": secrets.token_urlsafe(64),
    "ALLOWED_HOSTS": "api.cowry.example",
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/cowry_settings_check",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/1",
    "WEBHOOK_SECRETS_KEYS": Fernet.generate_key().decode(),
}


def _load_production_settings(**overrides: str) -> subprocess.CompletedProcess:
    """Import the production settings in a fresh interpreter; an empty value stands for unset
    (django-environ treats an empty variable as missing, whatever a .env file says)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env |= REQUIRED | overrides | {"DJANGO_SETTINGS_MODULE": "config.settings_production"}
    code = "import django; django.setup(); print('started')"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    "redis",
    [
        {},
        {"REDIS_URL": "unix:///run/redis/redis.sock?db=0"},
        {"CELERY_BROKER_URL": "sentinel://10.0.0.1:26379;sentinel://10.0.0.2:26379"},
        {"CELERY_BROKER_URL": "rediss://broker.cowry.internal:6380/1"},
    ],
)
def test_production_settings_start_with_every_required_variable(redis):
    result = _load_production_settings(**redis)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "started"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("DATABASE_URL", "", "Set DATABASE_URL"),
        ("REDIS_URL", "", "Set REDIS_URL"),
        ("CELERY_BROKER_URL", "filesystem://", "Set CELERY_BROKER_URL"),
        ("SECRET_KEY", "dev-only-insecure-secret-key-change-me-in-production-0123", "SECRET_KEY"),
        ("ALLOWED_HOSTS", "", "Set ALLOWED_HOSTS"),
        # shorter than a task's retry backoff: the broker would hand it to a second worker
        ("CELERY_VISIBILITY_TIMEOUT_SECONDS", "120", "CELERY_VISIBILITY_TIMEOUT_SECONDS"),
    ],
)
def test_production_settings_refuse_embedded_defaults(variable, value, message):
    result = _load_production_settings(**{variable: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


@pytest.mark.parametrize(("given", "read"), [({}, "0"), ({"TRUSTED_PROXY_COUNT": "1"}, "1")])
def test_production_trusts_x_forwarded_for_only_when_told_there_is_a_proxy(given, read):
    """With no proxy in front, a client's own X-Forwarded-For would choose the address the
    dashboard's login throttle counts (merchants.logins): trusted only when told."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env |= REQUIRED | given | {"DJANGO_SETTINGS_MODULE": "config.settings_production"}
    code = (
        "import django; django.setup(); from django.conf import settings;"
        " print(settings.TRUSTED_PROXY_COUNT)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.stdout.strip() == read, result.stderr
