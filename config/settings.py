"""One settings module for every environment, driven by environment variables.

Defaults give the zero-setup run (SQLite, filesystem Celery broker, in-memory
channel layer, database cache). Production sets DATABASE_URL, REDIS_URL,
CELERY_BROKER_URL, SECRET_KEY and ALLOWED_HOSTS. Every variable is listed in
the README.
"""

from pathlib import Path

import environ
import structlog
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DATA_DIR = Path(env.str("DATA_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="insecure-zero-setup-key-change-me-in-production")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
SITE_URL = env.str("SITE_URL", default="http://localhost:8000")

INSTALLED_APPS = [
    "daphne",
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
    "jobs",
    "integrations",
    "leadgen",
    "tracking",
    "crm",
    "prototypes",
    "chat",
    "blog",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django_structlog.middlewares.RequestMiddleware",
    "config.middleware.RequestIdHeaderMiddleware",
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
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
DATABASES = {
    "default": env.db(
        "DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'db.sqlite3'}"
    )
}
# Added to, not replaced: DATABASE_URL's query string may set options too (e.g. ?sslmode=require).
_database_options = DATABASES["default"].setdefault("OPTIONS", {})
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and beat share one SQLite file: WAL plus IMMEDIATE
    # transactions turn lock contention into short waits, not errors.
    _database_options.update(
        timeout=30,
        transaction_mode="IMMEDIATE",
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    )
else:
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
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env.str("CACHE_KEY_PREFIX", default="leadgen"),
            # One pool per process, not one per request thread (config/cache.py).
            "OPTIONS": {"pool_class": "config.cache.SharedConnectionPool"},
        }
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "cache_table",
        }
    }
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Celery ----------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL or "filesystem://")
CELERY_TASK_IGNORE_RESULT = True
# Workers log through LOGGING (structlog JSON) like the web process.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = env.int("CELERY_WORKER_PREFETCH_MULTIPLIER", default=4)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "broker"
    # The transport expects its folders to exist; the zero-setup run must not need a manual step.
    for _folder in ("queue", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
    # The filesystem transport has no fanout exchange for remote control.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False

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
# Run messages of committed jobs wait this long for others to share a message (0: sent at commit).
JOBS_DISPATCH_LINGER_MS = env.float("JOBS_DISPATCH_LINGER_MS", default=5.0)
JOBS_DISPATCH_MAX_BATCH = env.int("JOBS_DISPATCH_MAX_BATCH", default=10)
OPS_ALERT_EMAILS = env.list("OPS_ALERT_EMAILS", default=[])

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
LEADS_PROTOTYPE_SERVICE_TYPES = env.list(
    "LEADS_PROTOTYPE_SERVICE_TYPES", default=["diagnostic", "process_automation"]
)
LEADS_PROTOTYPE_QUOTA = env.int("LEADS_PROTOTYPE_QUOTA", default=3)
LEADS_PROTOTYPE_WINDOW_SECONDS = env.int("LEADS_PROTOTYPE_WINDOW_SECONDS", default=24 * 3600)
LEADS_PROTOTYPE_HOLD_SECONDS = env.int("LEADS_PROTOTYPE_HOLD_SECONDS", default=20 * 60)
LEADS_IDEMPOTENCY_TTL_SECONDS = env.int("LEADS_IDEMPOTENCY_TTL_SECONDS", default=24 * 3600)
CONFIRMATION_EMAIL_DELAY = env.int("CONFIRMATION_EMAIL_DELAY", default=600)  # seconds
LEADS_PHONE_REGION = env.str("LEADS_PHONE_REGION", default="US")  # for numbers typed without +country
RECAPTCHA_SITE_KEY = env.str("RECAPTCHA_SITE_KEY", default="")
RECAPTCHA_ACTION = env.str("RECAPTCHA_ACTION", default="lead_form")
RECAPTCHA_MIN_SCORE = env.float("RECAPTCHA_MIN_SCORE", default=0.5)
RECAPTCHA_HOSTNAMES = env.list("RECAPTCHA_HOSTNAMES", default=[])  # empty: ALLOWED_HOSTS

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
    "EXCEPTION_HANDLER": "config.api.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
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

# --- Logging: structured, one JSON line per event, no request bodies -----------------
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOG_FORMAT = env.str("LOG_FORMAT", default="console" if DEBUG else "json")
DJANGO_STRUCTLOG_CELERY_ENABLED = True
DJANGO_STRUCTLOG_IP_LOGGING_ENABLED = False  # client IPs are PII
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {
            "()": structlog.stdlib.ProcessorFormatter,
            "processor": structlog.processors.JSONRenderer()
            if LOG_FORMAT == "json"
            else structlog.dev.ConsoleRenderer(colors=False),
            "foreign_pre_chain": [
                structlog.contextvars.merge_contextvars,
                structlog.processors.TimeStamper(fmt="iso"),
                structlog.stdlib.add_logger_name,
                structlog.stdlib.add_log_level,
            ],
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # urllib3 logs full URLs, query strings included, at DEBUG.
        "urllib3": {"level": "WARNING"},
        "celery": {"level": LOG_LEVEL},
    },
}
structlog.configure(
    processors=[
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.filter_by_level,
        structlog.processors.TimeStamper(fmt="iso"),
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ],
    logger_factory=structlog.stdlib.LoggerFactory(),
    cache_logger_on_first_use=True,
)

# --- Web-form intake integrations (issue 3) ---------------------------------------------
# Empty secrets mean "not configured": client_from_settings() returns None.
RECAPTCHA_SECRET_KEY = env.str("RECAPTCHA_SECRET_KEY", default="")
RECAPTCHA_VERIFY_URL = env.str("RECAPTCHA_VERIFY_URL", default="https://www.google.com/recaptcha/api/siteverify")
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

# --- Email lead tracking (tracking/, crm/) ---
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
IMAP_POLL_TIME_BUDGET_SECONDS = env.int("IMAP_POLL_TIME_BUDGET_SECONDS", default=240)
IMAP_POLL_MAX_ATTEMPTS = env.int("IMAP_POLL_MAX_ATTEMPTS", default=3)
PHONE_DEFAULT_REGION = env.str("PHONE_DEFAULT_REGION", default="US")
STORE_MAPPING_CACHE_SECONDS = env.int("STORE_MAPPING_CACHE_SECONDS", default=300)
LEAD_WRITE_BREAKER_FAIL_MAX = env.int("LEAD_WRITE_BREAKER_FAIL_MAX", default=5)
LEAD_WRITE_BREAKER_RESET_SECONDS = env.int("LEAD_WRITE_BREAKER_RESET_SECONDS", default=900)
LEAD_RETRY_MAX_ATTEMPTS = env.int("LEAD_RETRY_MAX_ATTEMPTS", default=3)
LEAD_RETRY_DELAY_SECONDS = env.int("LEAD_RETRY_DELAY_SECONDS", default=120)
LEAD_OUTREACH_SLA_MINUTES = env.int("LEAD_OUTREACH_SLA_MINUTES", default=5)
# imapclient logs protocol lines, message bodies included, at DEBUG: personal data stays out of logs.
LOGGING["loggers"]["imapclient"] = {"level": "WARNING"}

# --- First-party capture and CRM delivery (issue 5 parts) ---------------------------
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
TRACKING_SYNC_TIME_BUDGET_SECONDS = env.int(
    "TRACKING_SYNC_TIME_BUDGET_SECONDS", default=min(240, JOBS_LEASE_SECONDS - 60)
)
TRACKING_DELIVERY_MAX_ATTEMPTS = env.int("TRACKING_DELIVERY_MAX_ATTEMPTS", default=8)
# The sync runs 2 threads per call in flight, each with its own database connection, plus the job's own.
_database_pool = _database_options.get("pool")
if _database_pool and _database_pool["max_size"] < 2 * TRACKING_SYNC_CONCURRENCY + 2:
    raise ImproperlyConfigured("DATABASE_POOL_MAX_SIZE must be at least 2 × TRACKING_SYNC_CONCURRENCY + 2")

# --- Docs-site login through Auth0 (tracking/docs_auth.py, integrations/auth0/) ------
# The login answers 404 until all three are set. The domain is the tenant's (or its custom domain);
# a full http(s)://host:port URL is accepted too, for a local provider.
AUTH0_DOMAIN = env.str("AUTH0_DOMAIN", default="")  # e.g. example.eu.auth0.com
AUTH0_CLIENT_ID = env.str("AUTH0_CLIENT_ID", default="")
AUTH0_CLIENT_SECRET = env.str("AUTH0_CLIENT_SECRET", default="")
