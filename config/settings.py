"""One settings module for every environment, driven by environment variables.

Every run uses PostgreSQL (DATABASE_URL) and Redis (REDIS_URL: cache, channel
layer and, unless CELERY_BROKER_URL says otherwise, the Celery broker); both
are required, and `make run` starts local servers for them. Production also
sets SECRET_KEY and ALLOWED_HOSTS. Every variable is documented in
docs/configuration.md (a test keeps the two in step).
"""

from datetime import time
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from foundation.logging import log_format, logging_config, structlog_configure

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DATA_DIR = Path(env.str("DATA_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="insecure-zero-setup-key-change-me-in-production")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
SITE_URL = env.str("SITE_URL", default="http://localhost:8000")
# Set by `make run` (python -m standins): outside services are played by local stand-ins, whose inbox
# this is. Every page then says so; production refuses to start with it set (foundation/checks.py).
STANDINS_URL = env.str("STANDINS_URL", default="")

# No "daphne" app: only `runserver` needs it, and its import (Twisted, autobahn: 0.4 s of CPU) would be
# paid by every worker and command. The web processes import daphne themselves (config/serve.py).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "django_celery_beat",
    "import_export",
    "anymail",
    "channels",
    "django_structlog",
    "health_check",
    "foundation",
    "jobs",
    "integrations",
    "stores",
    "leadgen",
    "tracking",
    "docs_users",
    "docs_mcp",
    "crm",
    "prototypes",
    "chat",
    "blog",
    "sources",
    "privacy",
    "demo",
    "backoffice",
]

MIDDLEWARE = [
    "config.metrics.RequestMetricsMiddleware",  # first: it times all the others
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django_structlog.middlewares.RequestMiddleware",
    "config.middleware.RequestIdHeaderMiddleware",
    "config.middleware.UnstorableTextMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

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
                "config.context_processors.standins",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
# PostgreSQL and Redis in every run, `make run` included: one code path.
_LOCAL_SERVERS = "`make run` and scripts/with-services start local PostgreSQL and Redis servers and set it"
_DATABASE_URL = env.str("DATABASE_URL", default="")
if not _DATABASE_URL:
    raise ImproperlyConfigured(f"DATABASE_URL is required: a PostgreSQL URL (postgres://…); {_LOCAL_SERVERS}.")
DATABASES = {"default": env.db_url_config(_DATABASE_URL)}
if DATABASES["default"].get("ENGINE") != "django.db.backends.postgresql":
    _scheme = urlsplit(_DATABASE_URL).scheme  # not the whole URL: it may hold a password
    raise ImproperlyConfigured(
        f"DATABASE_URL must be a PostgreSQL URL (postgres://…), not {f'{_scheme}://…' if _scheme else 'this value'}; "
        f"{_LOCAL_SERVERS}."
    )
# Added to, not replaced: DATABASE_URL's query string may set options too (e.g. ?sslmode=require).
_database_options = DATABASES["default"].setdefault("OPTIONS", {})
if env.bool("DATABASE_POOL", default=True):
    # Under daphne every request runs in its own thread, so per-thread persistent
    # connections would pile up: a process-wide psycopg pool serves them instead.
    _database_options["pool"] = {
        "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=1),
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=20),
        "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
    }
else:
    # A process that runs one task at a time (a prefork Celery worker process, beat;
    # the Procfile sets DATABASE_POOL=false for them) keeps its one connection between
    # tasks instead of a pool check-out and return around each (bench/jobs measured it).
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=600)
if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
    # Parameters travel apart from the SQL, and a statement run a few times on a
    # connection is parsed and planned once (bench/jobs measured the saving).
    # Off behind a transaction-mode pooler that cannot keep prepared statements.
    _database_options.update(server_side_binding=True, prepare_threshold=2)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache, channel layer ------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
if not REDIS_URL:
    raise ImproperlyConfigured(
        f"REDIS_URL is required: a Redis URL (redis://…) for the cache, channel layer and broker; {_LOCAL_SERVERS}."
    )
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env.str("CACHE_KEY_PREFIX", default="leadgen"),
        # One pool per process, not one per request thread (foundation/cache.py).
        "OPTIONS": {"pool_class": "foundation.cache.SharedConnectionPool"},
    }
}
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

# --- Celery ----------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_TASK_IGNORE_RESULT = True
# Workers log through LOGGING (structlog JSON) like the web process.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = env.int("CELERY_WORKER_PREFETCH_MULTIPLIER", default=4)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_IMPORTS = ["config.sentry"]  # workers and beat start error reporting on their start signals

# Celery's Django fixup closes every DB connection after each task (and, with the psycopg
# pool in a prefork worker, the whole pool): a new PostgreSQL connection per task, about 60%
# of a no-op job's cost (bench/jobs). Keep them; config/celery.py hands the connection back
# around each task as Django does around each request.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)

# --- Durable jobs ----------------------------------------------------------------
JOBS_DEFAULT_MAX_ATTEMPTS = env.int("JOBS_DEFAULT_MAX_ATTEMPTS", default=8)
JOBS_REPLAY_ATTEMPTS = env.int("JOBS_REPLAY_ATTEMPTS", default=3)
JOBS_LEASE_SECONDS = env.int("JOBS_LEASE_SECONDS", default=300)
JOBS_BACKOFF_BASE_SECONDS = env.float("JOBS_BACKOFF_BASE_SECONDS", default=10.0)
JOBS_BACKOFF_MAX_SECONDS = env.float("JOBS_BACKOFF_MAX_SECONDS", default=3600.0)
JOBS_SWEEP_SECONDS = env.int("JOBS_SWEEP_SECONDS", default=10)
# A job whose run message was sent this long ago and is still pending gets another (the message was lost).
JOBS_REDISPATCH_SECONDS = env.int("JOBS_REDISPATCH_SECONDS", default=30)
# Run messages of committed jobs wait this long for others to share a message (0: sent at commit).
JOBS_DISPATCH_LINGER_MS = env.float("JOBS_DISPATCH_LINGER_MS", default=5.0)
JOBS_DISPATCH_MAX_BATCH = env.int("JOBS_DISPATCH_MAX_BATCH", default=10)
OPS_ALERT_EMAILS = env.list("OPS_ALERT_EMAILS", default=[])

# --- Long jobs and job retention (jobs/heartbeat.py, jobs/retention.py) ---------------
# A running job's lease is extended every JOBS_HEARTBEAT_SECONDS, so only a dead worker loses it.
JOBS_HEARTBEAT_SECONDS = env.float("JOBS_HEARTBEAT_SECONDS", default=JOBS_LEASE_SECONDS / 3)
# Jobs that work through a backlog (mailbox poll, CRM sync, retention) stop taking work after this
# and queue their continuation; the Celery limits below stop anything that still overruns.
JOBS_TIME_BUDGET_SECONDS = env.int("JOBS_TIME_BUDGET_SECONDS", default=JOBS_LEASE_SECONDS * 4 // 5)
# Per run message (a batch of up to JOBS_DISPATCH_MAX_BATCH jobs): the soft limit raises inside the
# handler (the job is retried), the hard limit kills the worker process (the sweep reclaims the job).
CELERY_TASK_SOFT_TIME_LIMIT = env.int("JOBS_SOFT_TIME_LIMIT_SECONDS", default=6 * JOBS_LEASE_SECONDS)
CELERY_TASK_TIME_LIMIT = env.int(
    "JOBS_HARD_TIME_LIMIT_SECONDS", default=CELERY_TASK_SOFT_TIME_LIMIT + JOBS_LEASE_SECONDS
)
# Succeeded and skipped jobs (and their attempts) older than this are deleted; dead jobs are kept.
JOBS_RETENTION_DAYS = env.int("JOBS_RETENTION_DAYS", default=14)
JOBS_RETENTION_BATCH = env.int("JOBS_RETENTION_BATCH", default=1000)
JOBS_RETENTION_HOUR_UTC = env.int("JOBS_RETENTION_HOUR_UTC", default=4)

# --- Email -------------------------------------------------------------------------
MAILGUN_API_KEY = env.str("MAILGUN_API_KEY", default="")
ANYMAIL = {
    "MAILGUN_API_KEY": MAILGUN_API_KEY,
    "MAILGUN_SENDER_DOMAIN": env.str("MAILGUN_SENDER_DOMAIN", default=""),
    "MAILGUN_API_URL": env.str("MAILGUN_API_URL", default="https://api.mailgun.net/v3"),
}
EMAIL_BACKEND = env.str(
    "EMAIL_BACKEND",
    default="anymail.backends.mailgun.EmailBackend"
    if MAILGUN_API_KEY
    else "django.core.mail.backends.console.EmailBackend",
)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Sales <sales@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# --- Phone numbers: written without +country, they are read in this region (intake, email parsing,
# redaction) ---
PHONE_DEFAULT_REGION = env.str("PHONE_DEFAULT_REGION", default="US")

# --- Outbound HTTP -------------------------------------------------------------------
HTTP_CONNECT_TIMEOUT = env.float("HTTP_CONNECT_TIMEOUT", default=5.0)
HTTP_READ_TIMEOUT = env.float("HTTP_READ_TIMEOUT", default=20.0)
HTTP_USER_AGENT = env.str("HTTP_USER_AGENT", default="leadgen-backoffice/1.0")

# --- Web-form lead intake (leadgen/) ------------------------------------------------
CHAT_API_KEY = env.str("CHAT_API_KEY", default="")  # X-Chat-Api-Key of the trusted sales-chat agent
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)  # proxies in front of daphne
LEADS_MAX_BODY_BYTES = env.int("LEADS_MAX_BODY_BYTES", default=64 * 1024)
LEADS_THROTTLE_RATE = env.str("LEADS_THROTTLE_RATE", default="30/min")  # per client IP
LEADS_SPAM_FILTER_ENABLED = env.bool("LEADS_SPAM_FILTER_ENABLED", default=True)
LEADS_VENDOR_FILTER_ENABLED = env.bool("LEADS_VENDOR_FILTER_ENABLED", default=True)
LEADS_PROTOTYPE_SERVICE_TYPES = env.list("LEADS_PROTOTYPE_SERVICE_TYPES", default=["diagnostic", "process_automation"])
LEADS_PROTOTYPE_QUOTA = env.int("LEADS_PROTOTYPE_QUOTA", default=3)
LEADS_PROTOTYPE_WINDOW_SECONDS = env.int("LEADS_PROTOTYPE_WINDOW_SECONDS", default=24 * 3600)
LEADS_PROTOTYPE_HOLD_SECONDS = env.int("LEADS_PROTOTYPE_HOLD_SECONDS", default=20 * 60)
LEADS_IDEMPOTENCY_TTL_SECONDS = env.int("LEADS_IDEMPOTENCY_TTL_SECONDS", default=24 * 3600)
CONFIRMATION_EMAIL_DELAY = env.int("CONFIRMATION_EMAIL_DELAY", default=600)  # seconds
RECAPTCHA_SITE_KEY = env.str("RECAPTCHA_SITE_KEY", default="")
RECAPTCHA_ACTION = env.str("RECAPTCHA_ACTION", default="lead_form")
RECAPTCHA_MIN_SCORE = env.float("RECAPTCHA_MIN_SCORE", default=0.5)
RECAPTCHA_HOSTNAMES = env.list("RECAPTCHA_HOSTNAMES", default=[])  # empty: ALLOWED_HOSTS

# --- Outside services of web-form intake: reCAPTCHA, the classifier, Pipedrive, ClickUp ---
# Empty secrets mean "not configured": client_from_settings() returns None.
RECAPTCHA_SECRET_KEY = env.str("RECAPTCHA_SECRET_KEY", default="")
RECAPTCHA_VERIFY_URL = env.str("RECAPTCHA_VERIFY_URL", default="https://www.google.com/recaptcha/api/siteverify")
# The script the lead form loads to get a token; its origin is allowed by the Content-Security-Policy.
RECAPTCHA_SCRIPT_URL = env.str("RECAPTCHA_SCRIPT_URL", default="https://www.google.com/recaptcha/api.js")
RECAPTCHA_TIMEOUT_SECONDS = env.float("RECAPTCHA_TIMEOUT_SECONDS", default=3.0)  # request path: keep it short
LLM_BASE_URL = env.str("LLM_BASE_URL", default="")  # OpenAI-compatible, e.g. https://litellm.example.com/v1
LLM_API_KEY = env.str("LLM_API_KEY", default="")
LLM_MODEL = env.str("LLM_MODEL", default="")
LLM_TIMEOUT_SECONDS = env.float("LLM_TIMEOUT_SECONDS", default=8.0)
PIPEDRIVE_API_TOKEN = env.str("PIPEDRIVE_API_TOKEN", default="")
PIPEDRIVE_API_URL = env.str("PIPEDRIVE_API_URL", default="https://api.pipedrive.com")
CLICKUP_API_TOKEN = env.str("CLICKUP_API_TOKEN", default="")
CLICKUP_LIST_ID = env.str("CLICKUP_LIST_ID", default="")  # the "Lead alerts" list
CLICKUP_API_URL = env.str("CLICKUP_API_URL", default="https://api.clickup.com")

# --- Auth, i18n, static ------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG and SITE_URL.startswith("https"))
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# --- API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "foundation.api.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["foundation.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    "DEFAULT_THROTTLE_RATES": {
        "leads": LEADS_THROTTLE_RATE,
        "lookup": "120/min",
        # Per docs session; past it page views are dropped (the answer is still 204).
        "docs_activity": env.str("DOCS_ACTIVITY_RATE", default="120/min"),
        # Per client IP: the MCP server is one client reporting for all its users.
        "mcp_events": env.str("MCP_EVENTS_RATE", default="6000/min"),
        "internal_trigger": "30/min",
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Lead-generation back office API",
    "DESCRIPTION": "Public intake and integration endpoints.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Logging: structlog; console lines at a terminal, JSON otherwise (foundation/logging.py) ---
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOG_FORMAT = log_format(env.str("LOG_FORMAT", default=""))
DJANGO_STRUCTLOG_CELERY_ENABLED = True
DJANGO_STRUCTLOG_IP_LOGGING_ENABLED = False  # client IPs are PII
LOGGING = logging_config(level=LOG_LEVEL, fmt=LOG_FORMAT)
structlog_configure()

# --- Email lead tracking (tracking/, crm/) --------------------------------------------
# The mailbox configured here is named "env"; more are added in admin (Mailbox), each naming the
# environment variable that holds its password.
IMAP_HOST = env.str("IMAP_HOST", default="")
IMAP_PORT = env.int("IMAP_PORT", default=993)
IMAP_USER = env.str("IMAP_USER", default="")
IMAP_PASSWORD = env.str("IMAP_PASSWORD", default="")
IMAP_FOLDER = env.str("IMAP_FOLDER", default="INBOX")
IMAP_SSL = env.bool("IMAP_SSL", default=True)
IMAP_CA_FILE = env.str("IMAP_CA_FILE", default="")
IMAP_TIMEOUT_SECONDS = env.float("IMAP_TIMEOUT_SECONDS", default=30.0)
IMAP_FETCH_BATCH = env.int("IMAP_FETCH_BATCH", default=100)
IMAP_POLL_SECONDS = env.int("IMAP_POLL_SECONDS", default=300)
IMAP_POLL_TIME_BUDGET_SECONDS = env.int("IMAP_POLL_TIME_BUDGET_SECONDS", default=JOBS_TIME_BUDGET_SECONDS)
LEAD_WRITE_BREAKER_FAIL_MAX = env.int("LEAD_WRITE_BREAKER_FAIL_MAX", default=5)
LEAD_WRITE_BREAKER_RESET_SECONDS = env.int("LEAD_WRITE_BREAKER_RESET_SECONDS", default=900)
LEAD_RETRY_DELAY_SECONDS = env.int("LEAD_RETRY_DELAY_SECONDS", default=120)
LEAD_OUTREACH_SLA_MINUTES = env.int("LEAD_OUTREACH_SLA_MINUTES", default=5)
# Leads of the web form, chat and platforms join their contact and open an outreach task (off: only email leads).
LEAD_IDENTITY_ENABLED = env.bool("LEAD_IDENTITY_ENABLED", default=True)
# Leads of no store (the shared pool): the quiet hours their outreach tasks and escalations keep.
SHARED_POOL_TIMEZONE = env.str("SHARED_POOL_TIMEZONE", default="America/New_York")
SHARED_POOL_QUIET_HOURS_START = time.fromisoformat(env.str("SHARED_POOL_QUIET_HOURS_START", default="21:00"))
SHARED_POOL_QUIET_HOURS_END = time.fromisoformat(env.str("SHARED_POOL_QUIET_HOURS_END", default="08:00"))
# Owners and escalation (crm/assignment.py, crm/escalation.py).
TASK_ESCALATION_CHECK_SECONDS = env.int("TASK_ESCALATION_CHECK_SECONDS", default=60)
SHARED_POOL_REASSIGN_OVERDUE = env.bool("SHARED_POOL_REASSIGN_OVERDUE", default=False)

# --- First-party capture and CRM delivery (docs_users/, integrations/kapa/, integrations/profile_webhook/) ---
CRM_WEBHOOK_URL = env.str("CRM_WEBHOOK_URL", default="")  # empty: profile delivery is off
CRM_SIGNING_SECRET = env.str("CRM_SIGNING_SECRET", default="")  # whsec_<base64>; empty: unsigned
KAPA_API_URL = env.str("KAPA_API_URL", default="https://api.kapa.ai")
KAPA_API_KEY = env.str("KAPA_API_KEY", default="")  # empty: Kapa engagement is not fetched
KAPA_PROJECT_ID = env.str("KAPA_PROJECT_ID", default="")
# Must equal the salt the docs site mints Kapa sessions with: changing it orphans every user's history.
KAPA_OWNER_SALT = env.str("KAPA_OWNER_SALT", default="")
# Names counted in Kapa questions, whole word and case-insensitive; "Kafka" is always dropped.
KAPA_COMPETITORS = env.list(
    "KAPA_COMPETITORS", default=["Confluent", "WarpStream", "Amazon MSK", "Aiven", "Pulsar", "Kinesis", "AutoMQ"]
)
# Service key the MCP server sends in X-Service-Key to POST /api/tracking/mcp-events; empty: endpoint refuses all.
TRACKING_MCP_SERVICE_KEY = env.str("TRACKING_MCP_SERVICE_KEY", default="")
# Bearer secret of the internal trigger endpoints (/internal/tracking/sync, …/retention); empty: they answer 404.
CRM_INVOKE_SECRET = env.str("CRM_INVOKE_SECRET", default="")
LEAD_RETENTION_DAYS = env.int("LEAD_RETENTION_DAYS", default=30)
TRACKING_RETENTION_BATCH = env.int("TRACKING_RETENTION_BATCH", default=1000)
TRACKING_SYNC_HOUR_UTC = env.int("TRACKING_SYNC_HOUR_UTC", default=3)  # the daily sync's beat trigger
TRACKING_SYNC_CONCURRENCY = env.int("TRACKING_SYNC_CONCURRENCY", default=8)
# Sync jobs run side by side on separate worker processes, the calls in flight split between them.
TRACKING_SYNC_SHARDS = env.int("TRACKING_SYNC_SHARDS", default=2)
TRACKING_SYNC_BATCH = env.int("TRACKING_SYNC_BATCH", default=500)
# One sync job stops taking users after this long and queues its continuation; below the job lease.
TRACKING_SYNC_TIME_BUDGET_SECONDS = env.int("TRACKING_SYNC_TIME_BUDGET_SECONDS", default=JOBS_TIME_BUDGET_SECONDS)
# The sync runs 2 threads per call in flight, each with its own database connection, plus the job's own.
_database_pool = _database_options.get("pool")
if _database_pool and _database_pool["max_size"] < 2 * TRACKING_SYNC_CONCURRENCY + 2:
    raise ImproperlyConfigured("DATABASE_POOL_MAX_SIZE must be at least 2 × TRACKING_SYNC_CONCURRENCY + 2")

# --- Docs-site login through Auth0 (docs_users/docs_auth.py, integrations/auth0/) ------
# The login answers 404 until all three are set. The domain is the tenant's (or its custom domain);
# a full http(s)://host:port URL is accepted too, for a local provider.
AUTH0_DOMAIN = env.str("AUTH0_DOMAIN", default="")  # e.g. example.eu.auth0.com
AUTH0_CLIENT_ID = env.str("AUTH0_CLIENT_ID", default="")
AUTH0_CLIENT_SECRET = env.str("AUTH0_CLIENT_SECRET", default="")

# --- AI prototypes (prototypes/, integrations/v0/) ------------------------------------------
V0_API_URL = env.str("V0_API_URL", default="https://api.v0.dev/v2")
V0_API_KEY = env.str("V0_API_KEY", default="")  # empty: prototypes are not generated (recorded as failed)
V0_MODEL = env.str("V0_MODEL", default="v0-pro")
V0_SYSTEM_PROMPT = env.str(
    "V0_SYSTEM_PROMPT",
    default="Build a polished, working single-page web app prototype with Next.js and Tailwind CSS. "
    "Use realistic sample data; no sign-in, payments or external services.",
)
V0_CHAT_WEB_URL = env.str("V0_CHAT_WEB_URL", default="https://v0.app/chat/")  # + chat id: the admin's link
V0_STREAM_IDLE_SECONDS = env.float("V0_STREAM_IDLE_SECONDS", default=120.0)  # silence that ends a relay
PROTOTYPES_CHECK_SECONDS = env.int("PROTOTYPES_CHECK_SECONDS", default=120)  # between processor checks
PROTOTYPES_CHECK_CONCURRENCY = env.int("PROTOTYPES_CHECK_CONCURRENCY", default=5)  # across all workers
PROTOTYPES_STALE_SECONDS = env.int("PROTOTYPES_STALE_SECONDS", default=15 * 60)
PROTOTYPES_STREAM_HEARTBEAT_SECONDS = env.float("PROTOTYPES_STREAM_HEARTBEAT_SECONDS", default=15.0)
PROTOTYPES_STREAM_MAX_SECONDS = env.int("PROTOTYPES_STREAM_MAX_SECONDS", default=30 * 60)  # then the browser reconnects
PROTOTYPES_STREAM_RATE = env.str("PROTOTYPES_STREAM_RATE", default="60/min")  # stream opens per client IP
# --- Inbound lead sources: signed webhooks of ad and form platforms (sources/, integrations/facebook/) ---
SOURCES_MAX_BODY_BYTES = env.int("SOURCES_MAX_BODY_BYTES", default=256 * 1024)
# Per client IP: a platform sends from a few addresses, each carrying many advertisers' leads.
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["sources"] = env.str("SOURCES_THROTTLE_RATE", default="600/min")
SOURCES_REQUEST_LOG_DAYS = env.int("SOURCES_REQUEST_LOG_DAYS", default=30)  # then a request's row (and body) goes
FACEBOOK_GRAPH_URL = env.str("FACEBOOK_GRAPH_URL", default="https://graph.facebook.com/v21.0")
# --- Back office dashboard (backoffice/) --------------------------------------------
# Figures are computed at most once per this many seconds per period and store set; 0 computes every load.
DASHBOARD_CACHE_SECONDS = env.int("DASHBOARD_CACHE_SECONDS", default=60)

# --- Sales chat relay (chat/, integrations/agent/) ------------------------------------
# Unset CHAT_AGENT_URL: the stream answers 503. ws(s):// is the agent's own WebSocket; http(s):// a stock AgentOS.
CHAT_AGENT_URL = env.str("CHAT_AGENT_URL", default="")
CHAT_AGENT_TOKEN = env.str("CHAT_AGENT_TOKEN", default="")  # sent as "Authorization: Bearer …" when set
CHAT_AGENT_ID = env.str("CHAT_AGENT_ID", default="sales-agent")  # AgentOS: POST {url}/agents/{id}/runs
CHAT_AGENT_CONNECT_TIMEOUT_SECONDS = env.float("CHAT_AGENT_CONNECT_TIMEOUT_SECONDS", default=5.0)
CHAT_AGENT_FIRST_TOKEN_TIMEOUT_SECONDS = env.float("CHAT_AGENT_FIRST_TOKEN_TIMEOUT_SECONDS", default=30.0)
CHAT_AGENT_TIMEOUT_SECONDS = env.float("CHAT_AGENT_TIMEOUT_SECONDS", default=120.0)  # a whole answer
CHAT_MAX_BODY_BYTES = env.int("CHAT_MAX_BODY_BYTES", default=16 * 1024)
CHAT_STREAM_RATE_PER_SESSION = env.str("CHAT_STREAM_RATE_PER_SESSION", default="20/min")
CHAT_STREAM_RATE_PER_IP = env.str("CHAT_STREAM_RATE_PER_IP", default="60/min")
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["chat_transcript"] = env.str("CHAT_TRANSCRIPT_RATE", default="120/min")
CHAT_WIDGET_TOKEN_MAX_AGE_SECONDS = env.int("CHAT_WIDGET_TOKEN_MAX_AGE_SECONDS", default=24 * 3600)
CHAT_RETENTION_DAYS = env.int("CHAT_RETENTION_DAYS", default=90)  # after a session's last message
CHAT_RETENTION_BATCH = env.int("CHAT_RETENTION_BATCH", default=1000)
CHAT_RETENTION_HOUR_UTC = env.int("CHAT_RETENTION_HOUR_UTC", default=4)

# --- Docs MCP server at /mcp (docs_mcp/, its own uvicorn process) ---------------------
# Off (404) until AUTH0_DOMAIN and MCP_AUDIENCE are set. MCP_AUDIENCE is the identifier of the
# Auth0 API the access tokens are issued for; the resource is SITE_URL + /mcp.
MCP_AUDIENCE = env.str("MCP_AUDIENCE", default="")
MCP_REQUIRED_SCOPES = env.list("MCP_REQUIRED_SCOPES", default=[])  # each must be in the token's `scope`
# Origins (scheme://host[:port]) whose pages get_page may read; empty: get_page is off.
MCP_DOCS_ORIGINS = env.list("MCP_DOCS_ORIGINS", default=[])
MCP_SEARCH_RESULTS = env.int("MCP_SEARCH_RESULTS", default=5)
# The Kapa integration the tools' searches and questions are filed under in Kapa's analytics; empty: its default.
KAPA_INTEGRATION_ID = env.str("KAPA_INTEGRATION_ID", default="")
MCP_TOOL_CALLS_RATE = env.str("MCP_TOOL_CALLS_RATE", default="120/min")  # per signed-in user
MCP_MAX_REQUEST_BYTES = env.int("MCP_MAX_REQUEST_BYTES", default=256 * 1024)
# Where the web process's /readyz reaches the MCP process. The default is the port honcho gives the
# Procfile's `mcp` (its fourth process type: PORT + 300).
MCP_INTERNAL_URL = env.str("MCP_INTERNAL_URL", default=f"http://127.0.0.1:{env.int('PORT', default=8000) + 300}")
# --- Blog delivery: cached WordPress proxy (blog/, integrations/wordpress/) ------------
WORDPRESS_API_URL = env.str("WORDPRESS_API_URL", default="")  # the site's /wp-json root; empty: blog answers 503
WORDPRESS_USERNAME = env.str("WORDPRESS_USERNAME", default="")  # with an application password, if posts need auth
WORDPRESS_APP_PASSWORD = env.str("WORDPRESS_APP_PASSWORD", default="")
WORDPRESS_TIMEOUT_SECONDS = env.float("WORDPRESS_TIMEOUT_SECONDS", default=5.0)  # request path: keep it short
BLOG_CACHE_TTL_SECONDS = env.int("BLOG_CACHE_TTL_SECONDS", default=300)
BLOG_STALE_SECONDS = env.int("BLOG_STALE_SECONDS", default=24 * 3600)  # last good copy kept past the TTL
BLOG_CACHE_API_KEY = env.str("BLOG_CACHE_API_KEY", default="")  # X-Cache-Api-Key of the purge endpoints
BLOG_PURGE_SIGNING_SECRET = env.str("BLOG_PURGE_SIGNING_SECRET", default="")  # whsec_…: signed purges accepted
# Every request thread may hold a cache connection at once: a burst of cold blog requests waiting on one
# WordPress fetch is more threads per process than redis-py's default pool limit of 100 (then it raises).
CACHES["default"]["OPTIONS"].setdefault("max_connections", env.int("REDIS_MAX_CONNECTIONS", default=1000))
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"].update(
    {
        "blog": env.str("BLOG_THROTTLE_RATE", default="300/min"),  # per client IP, reads that reach WordPress
        "blog_refresh": env.str("BLOG_REFRESH_THROTTLE_RATE", default="20/min"),  # per client IP, ?cache=false
        "blog_purge": env.str("BLOG_PURGE_THROTTLE_RATE", default="30/min"),  # per client IP, purges
    }
)

# --- Security hardening (foundation/: client_ip.py, secrets.py, checks.py, limits.py) ---
# Entries `host` or `host:port` an admin Mailbox may log in to; the env mailbox's IMAP_HOST is always allowed.
IMAP_ALLOWED_HOSTS = env.list("IMAP_ALLOWED_HOSTS", default=[])
# A message larger than this (its RFC822.SIZE) is not fetched: it is kept as a failed lead with the reason.
IMAP_MAX_MESSAGE_BYTES = env.int("IMAP_MAX_MESSAGE_BYTES", default=2 * 1024 * 1024)
# Polls that started on a message without finishing it; past this the message is kept as a failed lead.
IMAP_MESSAGE_MAX_ATTEMPTS = env.int("IMAP_MESSAGE_MAX_ATTEMPTS", default=3)
# A poll that started reading a message this long ago and has not finished it counts toward that limit; one still
# within it is reading beside this poll (a replay beside the scheduled poll), not stopped.
IMAP_MESSAGE_READ_SECONDS = env.int("IMAP_MESSAGE_READ_SECONDS", default=30)
# authserv-id of our own receiving server's Authentication-Results header; set: stores' emails must pass DMARC/SPF.
IMAP_TRUSTED_AUTHSERV_ID = env.str("IMAP_TRUSTED_AUTHSERV_ID", default="")
# Request bodies: read at most this much on any route (smaller per route in foundation/limits.py), within this time.
REQUEST_MAX_BODY_BYTES = env.int("REQUEST_MAX_BODY_BYTES", default=1024 * 1024)
REQUEST_BODY_TIMEOUT_SECONDS = env.float("REQUEST_BODY_TIMEOUT_SECONDS", default=30.0)
# A request's head (request line and headers) must arrive within this time of the connection's opening (on a
# kept-alive connection, of the next request's first byte); else 408 and the connection is closed.
REQUEST_HEAD_TIMEOUT_SECONDS = env.float("REQUEST_HEAD_TIMEOUT_SECONDS", default=10.0)
# Connections one client address (IPv6: its /64) may hold open to a web process; 0: no cap. Off behind trusted
# proxies: every connection then comes from a proxy, which caps its clients' connections itself.
MAX_CONNECTIONS_PER_IP = env.int("MAX_CONNECTIONS_PER_IP", default=0 if TRUSTED_PROXY_COUNT else 64)
# Streams open at once (foundation/streams.py), across web processes: per client IP bucket, per lead's
# progress stream, per chat session; past them, 429. 0: no cap.
STREAMS_PER_IP = env.int("STREAMS_PER_IP", default=20)
STREAMS_PER_LEAD = env.int("STREAMS_PER_LEAD", default=4)
STREAMS_PER_CHAT_SESSION = env.int("STREAMS_PER_CHAT_SESSION", default=2)
# A stream's slot lapses this long after its process last renewed it (every third of it): a process that
# dies gives its slots back by then.
STREAM_LEASE_SECONDS = env.float("STREAM_LEASE_SECONDS", default=60.0)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_MAX_BODY_BYTES
# HTTPS: on by default when the site is served over https; `manage.py check --deploy` fails without them.
_https_site = SITE_URL.startswith("https://")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=_https_site)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]  # probes and scrapes over plain HTTP
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if _https_site else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# X-Forwarded-Proto is believed only when a trusted proxy sets it; reached directly, anyone could.
if not TRUSTED_PROXY_COUNT:
    SECURE_PROXY_SSL_HEADER = None
# Content-Security-Policy for every page (django-csp): own scripts and styles, reCAPTCHA's frames and scripts.
_recaptcha = ["https://www.google.com/recaptcha/", "https://www.gstatic.com/recaptcha/"]
if not RECAPTCHA_SCRIPT_URL.startswith("https://www.google.com/recaptcha/"):
    _recaptcha.append(RECAPTCHA_SCRIPT_URL.rsplit("/", 1)[0] + "/")
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'", *_recaptcha],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "frame-src": _recaptcha,
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    }
}
# Admin login lockout (django-axes): per username and client IP, counted through foundation.client_ip.
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_HOURS", default=0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "foundation.client_ip.client_ip_for_axes"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no banner on every start of every process
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
INSTALLED_APPS += ["axes", "csp"]
MIDDLEWARE += ["csp.middleware.CSPMiddleware", "axes.middleware.AxesMiddleware"]
# /metrics (config/metrics.py) answers addresses or networks listed here (the client's address as
# foundation.client_ip reads it) and `Authorization: Bearer METRICS_TOKEN`; anyone else, and everyone while both
# are empty, gets a 404. Several web processes: PROMETHEUS_MULTIPROC_DIR (docs/operations.md).
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=[])
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# Errors go to Sentry when SENTRY_DSN is set (config/sentry.py), personal data redacted first.
SENTRY_DSN = env.str("SENTRY_DSN", default="")
SENTRY_ENVIRONMENT = env.str("SENTRY_ENVIRONMENT", default="")  # empty: "production"
SENTRY_RELEASE = env.str("SENTRY_RELEASE", default="")  # empty: the git commit when there is one
SENTRY_TRACES_SAMPLE_RATE = env.float("SENTRY_TRACES_SAMPLE_RATE", default=0.0)  # share of requests traced
# Bearer token that shows /readyz's details to a caller that is not a staff session; empty: staff only.
HEALTH_CHECK_TOKEN = env.str("HEALTH_CHECK_TOKEN", default="")
READYZ_CACHE_SECONDS = env.float("READYZ_CACHE_SECONDS", default=5.0)
# /readyz is unhealthy when the dispatcher's sweep has not run for this long (beat stopped or schedule off).
JOBS_SWEEP_LATE_SECONDS = env.int("JOBS_SWEEP_LATE_SECONDS", default=max(120, 6 * JOBS_SWEEP_SECONDS))
# The docs-site sign-in has its own session cookie: signing out of the docs never signs staff out of admin.
DOCS_SESSION_COOKIE_NAME = env.str("DOCS_SESSION_COOKIE_NAME", default="docs_sessionid")
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["docs_login"] = env.str("DOCS_LOGIN_RATE", default="20/min")
# Ids of foundation/checks.py's production checks (security.E1xx) an operator accepts on purpose.
SILENCED_SYSTEM_CHECKS = env.list("SILENCED_SYSTEM_CHECKS", default=[])
SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] = [
    "drf_spectacular.hooks.postprocess_schema_enums",
    "config.api_schema.request_bodies_as_enforced",
    "config.api_schema.every_operation_refuses_unstorable_text",
]
