"""Cowry settings. Everything comes from the environment (see .env.example); the defaults are
the embedded mode of `make run`: its own PostgreSQL server (var/pg) and Celery's filesystem
transport under var/."""

from pathlib import Path

import dotenv
import environ
from django.core.exceptions import ImproperlyConfigured
from django_guid.integrations import CeleryIntegration

from config import install_secrets

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

env = environ.Env()
dotenv.load_dotenv(BASE_DIR / ".env", override=False)  # as bin/run reads it; the environment wins

DEBUG = env.bool("DEBUG", default=False)
# Without them in the environment: this install's own, generated once under var/ (bin/run does it
# first). config.settings_production takes both from the environment only.
_INSTALL_SECRETS = (
    {}
    if env("SECRET_KEY", default="") and env("WEBHOOK_SECRETS_KEYS", default="")
    else install_secrets.ensure(VAR_DIR)
)
SECRET_KEY = env("SECRET_KEY", default="") or _INSTALL_SECRETS["SECRET_KEY"]
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])

INSTALLED_APPS = [
    "unfold.apps.BasicAppConfig",  # the dashboard's theme; must precede django.contrib.admin
    "unfold.contrib.filters",
    "config.apps.CowryAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_guid",
    "drf_spectacular_sidecar",  # /docs' Swagger UI and Redoc assets, served by us (no CDN)
    "merchants",
    "customers",
    "kyc",
    "quotes",
    "rails",
    "payments",
    "transfers",
    "webhooks",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
]

MIDDLEWARE = [
    "config.middleware.DropUnsafeRequestId",
    "django_guid.middleware.guid_middleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "merchants.two_factor.TwoFactorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# Dashboard logins see money and secrets: staff passwords are checked when set (create_staff_user,
# the dashboard's password change).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 12},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

ROOT_URLCONF = "config.urls"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

# Without DATABASE_URL: the server `make run` starts under var/pg (bin/run), over its socket.
_DATABASE_URL = env("DATABASE_URL", default="") or f"postgres://postgres@/cowry?host={VAR_DIR}/pg"
DATABASES = {"default": env.db_url_config(_DATABASE_URL)}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("Set DATABASE_URL to a PostgreSQL database (postgres://...).")
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=600)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "server_side_binding": True,
        "prepare_threshold": env.int("DATABASE_PREPARE_THRESHOLD", default=2),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", default="")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
FORMAT_MODULE_PATH = ["config.formats"]  # the dashboard shows times as ISO 8601
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"  # what `collectstatic` writes, if a deployment runs it
STATIC_ROOT.mkdir(exist_ok=True)
# The web process serves the dashboard's static files (WhiteNoise), found where the apps keep
# them: `make run` and a deployment need no collectstatic step and no separate static server.
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = env("MEDIA_ROOT", default=str(VAR_DIR / "media"))
MEDIA_URL = "media/"

CSRF_FAILURE_VIEW = "config.views.csrf_failure"
# Dashboard messages are kept server-side, never in the default storage's cookie (signed, not
# encrypted); a new secret is in none of them (core.secret_once).
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["merchants.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": ["merchants.throttling.ApiKeyRateThrottle"],
    "DEFAULT_RENDERER_CLASSES": ["core.content.JsonRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.content.JsonParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "core.content.JsonWhateverTheAccept",
    "EXCEPTION_HANDLER": "core.exceptions.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "config.schema.CowryAutoSchema",
    "COERCE_DECIMAL_TO_STRING": True,
    # core.fields.TIMESTAMP_FORMAT (DRF converts to the current time zone, UTC, first)
    "DATETIME_FORMAT": "%Y-%m-%dT%H:%M:%S.%fZ",
    "UNAUTHENTICATED_USER": None,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Cowry Merchant Payments API",
    "DESCRIPTION": (
        "Merchant-facing API for mobile money payins, payouts and two-leg transfers in XAF "
        "and XOF. Every endpoint needs the X-Api-Key and X-Api-Secret headers.\n\n"
        "After the endpoints: **Webhooks** (the events Cowry POSTs to you, their headers and"
        " signing recipe), **Errors** (every `reason` an error can carry and what to do) and"
        " the **Merchant guide** (operator prediction, sandbox phone numbers). Redoc: /redoc."
    ),
    "VERSION": "1.0.0",
    # 3.1: the document's `webhooks` section holds every event Cowry POSTs to a merchant.
    "OAS_VERSION": "3.1.0",
    "WEBHOOKS": [
        "webhooks.schema.TEST_WEBHOOK",
        *(
            f"payments.webhook_events.{name}"
            for name in ("PAYIN_COMPLETED", "PAYIN_FAILED", "PAYOUT_COMPLETED", "PAYOUT_FAILED")
        ),
        *(
            f"transfers.webhook_events.TRANSFER_{name}"
            for name in (
                "PAYIN_COMPLETED",
                "PAYIN_FAILED",
                "PAYOUT_COMPLETED",
                "PAYOUT_FAILED",
                "COMPLETED",
                "FAILED",
            )
        ),
        "payments.webhook_events.REFUND_COMPLETED",
        "payments.webhook_events.REFUND_FAILED",
    ],
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "string", "format": "uuid"}},
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # An enum keeps its first component name wherever it appears: the operator status
    # (operators, predict), and the statuses payouts and refunds share.
    "ENUM_NAME_OVERRIDES": {
        "OperatorItemOutputStatusEnum": "quotes.models.OperatorStatus",
        "PayoutOutputStatusEnum": "payments.models.PayoutStatus",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.schema.meta_is_optional",
        "config.schema.spec_component_names",
        "config.schema.describe_responses",
        "webhooks.schema.webhook_headers",
        "config.schema.reference_sections_last",
    ],
    "DISABLE_ERRORS_AND_WARNINGS": False,
    # /docs loads Swagger UI from this service (drf-spectacular-sidecar), never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery -------------------------------------------------------------------------------------
_broker_dir = VAR_DIR / "broker"
# A host in the URL, or kombu warns "No hostname was supplied" at every connection.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="filesystem://localhost/")
# The least visibility timeout settings_production accepts: above every task's countdown and
# retry backoff (tests/test_task_countdowns.py), or a waiting retry would also run on a second
# worker.
VISIBILITY_TIMEOUT_FLOOR = 600
if CELERY_BROKER_URL.startswith("filesystem"):
    for sub in ("queue", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        # the exchange tables; kombu's default is ./control, in whatever the cwd is
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    _visibility_timeout = env.int("CELERY_VISIBILITY_TIMEOUT_SECONDS", default=3600)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # An unacknowledged task (its worker was killed) is handed out again after this long;
        # workers look for such tasks about every min(100, timeout / 3) seconds.
        "visibility_timeout": _visibility_timeout,
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": max(1, min(100, _visibility_timeout // 3)),
        # A broker that is down must fail a publish fast: the API answers 201 and the beat
        # sweeps resubmit what could not be enqueued.
        "socket_connect_timeout": 2,
        # ...and one that takes connections and never answers too: kombu waits for ever
        # otherwise (its BRPOP answers within brpop_timeout, 1 s, so consumers are unaffected).
        "socket_timeout": 5,
    }
# Publishing gives up after ~1 s of retries (the default retries for seconds per message).
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Lost broker connection: cancel unacked tasks, redelivered anyway (all idempotent), not run twice.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
# Database connections of the worker live as long as on the web (CONN_MAX_AGE, health checks:
# config.celery); Celery's fixup force-closes them only every few thousand tasks.
CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ROUTES = {
    "payments.tasks.*": {"queue": "provider"},
    "transfers.tasks.*": {"queue": "provider"},
    "webhooks.tasks.deliver_webhook": {"queue": "webhooks"},
    "kyc.tasks.*": {"queue": "kyc"},
}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BEAT_SCHEDULE = {
    "expire-quotes": {"task": "quotes.tasks.expire_quotes", "schedule": 60.0},
    "deliver-due-webhooks": {"task": "webhooks.tasks.deliver_due_webhooks", "schedule": 30.0},
    "fail-timed-out-payments": {
        "task": "payments.tasks.fail_timed_out_payments",
        "schedule": 60.0,
    },
    # answers lost with a killed worker: asked of the provider once overdue
    "ask-provider-about-overdue-payments": {
        "task": "payments.tasks.ask_provider_about_overdue_payments",
        "schedule": 30.0,
    },
    "fail-timed-out-transfers": {
        "task": "transfers.tasks.fail_timed_out_transfers",
        "schedule": 60.0,
    },
    "check-ledger": {"task": "payments.tasks.check_ledger", "schedule": 86400.0},
    "resume-stalled-kyc": {"task": "kyc.tasks.resume_stalled_kyc", "schedule": 60.0},
    "disable-failing-webhook-endpoints": {
        "task": "webhooks.tasks.disable_failing_endpoints",
        "schedule": 3600.0,
    },
    "purge-expired-idempotency-records": {
        "task": "merchants.tasks.purge_expired_idempotency_records",
        "schedule": 3600.0,
    },
}

# Cowry --------------------------------------------------------------------------------------
# Durations are refused at startup unless they make sense: a QUOTE_TTL_SECONDS of 0 made every
# quote expired by the time a payment used it, an IDEMPOTENCY_KEY_TTL_SECONDS of 0 forgot every
# key (a retried payout paid twice), a WEBHOOK_TIMEOUT_SECONDS of 0 failed every delivery, and
# a typo of 10**12 overflowed the date arithmetic (a 500 on every quote); a century is plenty.
LONGEST_DURATION_SECONDS = 100 * 366 * 86400


def _duration(name: str, value: float, *, zero_allowed: bool = False) -> float:
    long_enough = value >= 0 if zero_allowed else value > 0
    if not long_enough or value > LONGEST_DURATION_SECONDS:
        lowest = "0 or more" if zero_allowed else "more than 0"
        raise ImproperlyConfigured(
            f"Set {name} to a number of seconds, {lowest} and at most {LONGEST_DURATION_SECONDS}"
            f" (it is {value})."
        )
    return value


QUOTE_TTL_SECONDS = _duration("QUOTE_TTL_SECONDS", env.int("QUOTE_TTL_SECONDS", default=900))
PROVIDER_SIMULATION_DELAY_SECONDS = _duration(
    "PROVIDER_SIMULATION_DELAY_SECONDS",
    env.float("PROVIDER_SIMULATION_DELAY_SECONDS", default=1),
    zero_allowed=True,
)
# A leg the provider has not answered is asked its status again this long after an unanswered
# poll, or after as long as it has waited if longer: the interval grows.
PROVIDER_POLL_AFTER_SECONDS = _duration(
    "PROVIDER_POLL_AFTER_SECONDS", env.int("PROVIDER_POLL_AFTER_SECONDS", default=60)
)
PROVIDER_TIMEOUT_SECONDS = _duration(
    "PROVIDER_TIMEOUT_SECONDS", env.int("PROVIDER_TIMEOUT_SECONDS", default=3600)
)
KYC_REVIEW_DELAY_SECONDS = _duration(
    "KYC_REVIEW_DELAY_SECONDS", env.float("KYC_REVIEW_DELAY_SECONDS", default=1), zero_allowed=True
)
WEBHOOK_RETRY_SCHEDULE = [
    _duration("WEBHOOK_RETRY_SCHEDULE", int(s))
    for s in env.list("WEBHOOK_RETRY_SCHEDULE", default=[60, 300, 900, 3600, 14400, 43200])
]
# One delay per retry, and docs/webhooks.md fails a delivery after its seventh attempt: a list of
# another length would silently change how many attempts a merchant's receiver gets.
if len(WEBHOOK_RETRY_SCHEDULE) != 6:
    raise ImproperlyConfigured(
        "Set WEBHOOK_RETRY_SCHEDULE to six delays in seconds, one per retry (a delivery fails "
        f"after its seventh attempt); it has {len(WEBHOOK_RETRY_SCHEDULE)}."
    )
WEBHOOK_TIMEOUT_SECONDS = _duration(
    "WEBHOOK_TIMEOUT_SECONDS", env.float("WEBHOOK_TIMEOUT_SECONDS", default=10)
)
# Webhook signing secrets are stored Fernet-encrypted (core.secrets_at_rest). Comma-separated
# Fernet keys: the first encrypts, every one decrypts (rotation: put the new key first, run
# `reencrypt_webhook_secrets`, then drop the old key). Without it: this install's own key, made
# once (config.install_secrets).
WEBHOOK_SECRETS_KEYS = env.list("WEBHOOK_SECRETS_KEYS", default=[]) or [
    _INSTALL_SECRETS["WEBHOOK_SECRETS_KEYS"]
]
WEBHOOK_ALLOW_HTTP = env.bool("WEBHOOK_ALLOW_HTTP", default=False)
ALLOW_PRIVATE_NETWORK_URLS = env.bool("ALLOW_PRIVATE_NETWORK_URLS", default=False)
RATE_LIMIT_PER_MINUTE = env.int("RATE_LIMIT_PER_MINUTE", default=6000)
IDEMPOTENCY_KEY_TTL_SECONDS = _duration(
    "IDEMPOTENCY_KEY_TTL_SECONDS", env.int("IDEMPOTENCY_KEY_TTL_SECONDS", default=86400)
)
# An in-progress idempotency record older than this is taken to belong to a crashed request.
IDEMPOTENCY_LOCK_TIMEOUT_SECONDS = _duration(
    "IDEMPOTENCY_LOCK_TIMEOUT_SECONDS", env.int("IDEMPOTENCY_LOCK_TIMEOUT_SECONDS", default=60)
)


def _count(name: str, value: int, *, lowest: int = 1) -> int:
    if value < lowest:
        raise ImproperlyConfigured(f"Set {name} to {lowest} or more (it is {value}).")
    return value


# A dashboard list counts its rows exactly up to this many; past it, PostgreSQL's estimate
# (core.dashboard.EstimatingPaginator).
DASHBOARD_EXACT_COUNT_LIMIT = _count(
    "DASHBOARD_EXACT_COUNT_LIMIT", env.int("DASHBOARD_EXACT_COUNT_LIMIT", default=10_000)
)
# Dashboard logins (merchants.logins): failed logins are counted per username (any case) and
# per client address in the shared Redis; at the limit within the window, further attempts are
# refused without checking the password, until the window has passed since the last failure.
LOGIN_FAILURES_PER_USERNAME = _count(
    "LOGIN_FAILURES_PER_USERNAME", env.int("LOGIN_FAILURES_PER_USERNAME", default=5)
)
LOGIN_FAILURES_PER_ADDRESS = _count(
    "LOGIN_FAILURES_PER_ADDRESS", env.int("LOGIN_FAILURES_PER_ADDRESS", default=20)
)
LOGIN_FAILURE_WINDOW_SECONDS = int(
    _duration("LOGIN_FAILURE_WINDOW_SECONDS", env.int("LOGIN_FAILURE_WINDOW_SECONDS", default=900))
)
# How many proxies (load balancers) in front of the web process append the client's address to
# X-Forwarded-For: 0 (every settings module's default) reads REMOTE_ADDR. Set it to the number
# of proxies in front, no more: with none, a client's own X-Forwarded-For would pick the address
# the login throttle counts (merchants.logins.client_address).
TRUSTED_PROXY_COUNT = _count(
    "TRUSTED_PROXY_COUNT", env.int("TRUSTED_PROXY_COUNT", default=0), lowest=0
)
# A dashboard session ends this long after its login, however busy (config.admin_site); the
# cookie's age too. Django's default was two weeks.
DASHBOARD_SESSION_SECONDS = int(
    _duration("DASHBOARD_SESSION_SECONDS", env.int("DASHBOARD_SESSION_SECONDS", default=43200))
)
SESSION_COOKIE_AGE = DASHBOARD_SESSION_SECONDS
# `make bench` only: exposes POST /bench/floor (API-key auth + one INSERT), the floor figure.
BENCH_FLOOR_ENABLED = env.bool("BENCH_FLOOR_ENABLED", default=False)

# Health -------------------------------------------------------------------------------------
# /health (config.health) reports the worker check "error: silent for Ns", and "worker" in its
# `degraded` list (still 200), unless a Celery worker wrote its heartbeat within this long;
# each worker writes it every WORKER_HEARTBEAT_SECONDS, to the shared Redis (a file under var/
# in embedded mode, where the processes share the machine).
WORKER_HEARTBEAT_SECONDS = _duration(
    "WORKER_HEARTBEAT_SECONDS", env.float("WORKER_HEARTBEAT_SECONDS", default=10)
)
WORKER_SILENT_AFTER_SECONDS = int(
    _duration("WORKER_SILENT_AFTER_SECONDS", env.int("WORKER_SILENT_AFTER_SECONDS", default=60))
)
if WORKER_SILENT_AFTER_SECONDS <= WORKER_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        "Set WORKER_SILENT_AFTER_SECONDS above WORKER_HEARTBEAT_SECONDS, or /health reports a "
        "live worker silent between two heartbeats."
    )
CACHES["health"] = (
    {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        # A Redis that does not answer fails the check at once, not after the load balancer gave up.
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
    if REDIS_URL
    else {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(VAR_DIR / "health"),
    }
)

# Logs and request ids ----------------------------------------------------------------------
# The id of a request (config.middleware): the client's X-Request-Id when sane, or a new one; it
# follows the request into the Celery tasks it enqueues (a task from beat gets its own).
DJANGO_GUID = {
    "GUID_HEADER_NAME": "X-Request-Id",
    "VALIDATE_GUID": False,  # config.middleware.DropUnsafeRequestId checks it first
    "EXPOSE_HEADER": False,
    "INTEGRATIONS": [CeleryIntegration()],
}
# Every process (web, gunicorn's own lines: config.gunicorn_conf; worker and beat: config.celery)
# writes one JSON object per line (config.logging_config); LOG_FORMAT=plain for a terminal.
LOGGING_CONFIG = "config.logging_config.configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {
            "()": "django_guid.log_filters.CorrelationId",
            "correlation_id_field": "request_id",
        },
        "mask_private": {"()": "config.logging_config.MaskPrivate"},
        "no_template_context": {"()": "config.logfilters.DropTemplateContext"},
        "no_health_unavailable": {"()": "config.logfilters.DropHealthUnavailable"},
        "beat_send_error": {"()": "config.logfilters.OneLineBeatSendError"},
    },
    "formatters": {
        "json": {"()": "config.logging_config.JsonLines"},
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": env("LOG_FORMAT", default="json"),
            "filters": ["request_id", "mask_private"],
        }
    },
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {
        # /health's 503s are logged once an outage, by config.health, not once a probe.
        "django.request": {"level": "ERROR", "filters": ["no_health_unavailable"]},
        # At DEBUG its records carry whole template contexts (a one-time API secret included).
        "django.template": {"filters": ["no_template_context"]},
        # A due task beat could not send (the broker away): one line, not two stacks.
        "celery.beat": {"filters": ["beat_send_error"]},
        # A line per request and per task about the id it set.
        "django_guid": {"level": "WARNING"},
    },
}

# The dashboard's theme (django-unfold): the Django admin's URLs and ModelAdmins, restyled.
UNFOLD = {
    "SITE_TITLE": "Cowry",
    "SITE_HEADER": "Cowry dashboard",
    "SITE_SYMBOL": "payments",
    "SHOW_HISTORY": True,
    "SHOW_VIEW_ON_SITE": False,
    "SITE_URL": None,  # no public site: "View site" and "Return to site" led to a JSON 404
    "BORDER_RADIUS": "6px",
    # Each role's pages (config.sidebar): a merchant's payments, money, keys and team; the
    # ledger, catalog and prices for support and ops.
    "SIDEBAR": {
        "show_search": False,
        "show_all_applications": False,
        "navigation": "config.sidebar.navigation",
    },
    "ACCOUNT": {
        "navigation": [
            {"title": "Two-factor authentication", "link": "/admin/two-factor/setup/"},
            {"title": "Change password", "link": "/admin/password_change/"},
        ],
    },
}

# Support staff and ops must log in with a second factor (TOTP); production turns it on, `make
# run` leaves it optional so the sandbox stays quick to try. Merchant owners can require it for
# their own team (Merchant.require_two_factor).
# unfold's login form posts no `next`: a login at /admin/login/ lands on the dashboard's home.
LOGIN_REDIRECT_URL = "/admin/"
DASHBOARD_REQUIRE_2FA_FOR_STAFF = env.bool("DASHBOARD_REQUIRE_2FA_FOR_STAFF", default=False)
OTP_TOTP_ISSUER = "Cowry"
# How long a staff invite or second-factor enrolment link works (merchants.invites): once.
STAFF_INVITE_TTL_SECONDS = int(
    _duration("STAFF_INVITE_TTL_SECONDS", env.int("STAFF_INVITE_TTL_SECONDS", default=3 * 86400))
)
