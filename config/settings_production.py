"""Production settings: config.settings plus everything `manage.py check --deploy` asks for.

    DJANGO_SETTINGS_MODULE=config.settings_production

SECRET_KEY, ALLOWED_HOSTS, DATABASE_URL (PostgreSQL), REDIS_URL and CELERY_BROKER_URL (Redis)
must come from the environment (no development fallback here);
TLS is terminated by the load balancer, which sets X-Forwarded-Proto.
"""

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from config.settings import *  # noqa: F403
from config.settings import env

DEBUG = False
DASHBOARD_REQUIRE_2FA_FOR_STAFF = env.bool("DASHBOARD_REQUIRE_2FA_FOR_STAFF", default=True)

SECRET_KEY = env("SECRET_KEY", default="")
if len(SECRET_KEY) < 50 or SECRET_KEY.startswith(("dev-", "django-insecure")):
    raise ImproperlyConfigured("Set SECRET_KEY to a random value of at least 50 characters.")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=[])
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("Set ALLOWED_HOSTS to the host names the service answers on.")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# Fernet keys for the signing secrets and second factors (core.secrets_at_rest), from the
# environment only: never the development keyring of an install (var/secrets.env).
WEBHOOK_SECRETS_KEYS = env.list("WEBHOOK_SECRETS_KEYS", default=[])
if not WEBHOOK_SECRETS_KEYS:
    raise ImproperlyConfigured(
        "Set WEBHOOK_SECRETS_KEYS to one or more Fernet keys, comma-separated, the first one"
        " encrypting; make one with: python -c 'from"
        " cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
    )
for _key in WEBHOOK_SECRETS_KEYS:  # a typo would only surface at the first delivery or write
    try:
        Fernet(_key)
    except ValueError:
        raise ImproperlyConfigured(
            "WEBHOOK_SECRETS_KEYS holds a value that is not a Fernet key (32 url-safe"
            " base64-encoded bytes)."
        ) from None

# The embedded defaults of `make run` (its own PostgreSQL server, a filesystem broker, a
# per-process cache) would start, and quietly break the guarantees that need shared state: one
# database, a broker every worker reads, and one rate-limit count for every gunicorn worker.
if not env("DATABASE_URL", default=""):
    raise ImproperlyConfigured("Set DATABASE_URL to the PostgreSQL database (postgres://...).")
if not env("REDIS_URL", default="").startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured("Set REDIS_URL to the Redis server (redis://...).")
_REDIS_BROKERS = ("redis://", "rediss://", "redis+socket://", "sentinel://")
if not env("CELERY_BROKER_URL", default="").startswith(_REDIS_BROKERS):
    raise ImproperlyConfigured("Set CELERY_BROKER_URL to the Redis broker (redis://...).")
# The broker hands a task unacknowledged this long to another worker: it must outlast every
# countdown and retry backoff the tasks use, or a waiting retry would also run a second time.
_visibility_timeout = CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]  # noqa: F405
if _visibility_timeout < VISIBILITY_TIMEOUT_FLOOR:  # noqa: F405
    raise ImproperlyConfigured(
        f"Set CELERY_VISIBILITY_TIMEOUT_SECONDS to at least {VISIBILITY_TIMEOUT_FLOOR}"  # noqa: F405
        " (the default is 3600)."
    )

# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips it from clients).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
# /health is probed by the load balancer over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^health$"]
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

# Webhook and KYC URLs must be public HTTPS in production, whatever the environment says.
WEBHOOK_ALLOW_HTTP = False
ALLOW_PRIVATE_NETWORK_URLS = False
