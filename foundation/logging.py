"""Logging: structlog everywhere, console lines for a person at a terminal, JSON lines otherwise.

One line per request: django-structlog's `request_finished` (method, path without
its query string, status, duration, request id); its `request_started` is
dropped, and daphne's access log is off in the Procfile. Query strings stay out
because they carry personal data (`/api/leads/lookup?email=…`, OAuth codes).
"""

import sys
import time

import structlog
from django.dispatch import receiver
from django_structlog import signals


def log_format(configured: str) -> str:
    """`json` or `console`: LOG_FORMAT when set, else console on a terminal and JSON otherwise."""
    if configured:
        return configured
    return "console" if sys.stderr.isatty() else "json"


def drop_request_started(logger, method_name, event_dict):
    if event_dict.get("event") == "request_started":
        raise structlog.DropEvent
    return event_dict


SHARED_PROCESSORS = [
    structlog.contextvars.merge_contextvars,
    structlog.processors.TimeStamper(fmt="iso"),
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
]


def logging_config(*, level: str, fmt: str) -> dict:
    """The LOGGING setting; `fmt` is `json` or `console`."""
    renderer = structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "structured": {
                "()": structlog.stdlib.ProcessorFormatter,
                "processors": [structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
                "foreign_pre_chain": SHARED_PROCESSORS,
            },
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.db.backends": {"level": "WARNING"},
            # urllib3 logs full URLs, query strings included, at DEBUG.
            "urllib3": {"level": "WARNING"},
            # imapclient logs protocol lines, message bodies included, at DEBUG.
            "imapclient": {"level": "WARNING"},
            "celery": {"level": level},
        },
    }


def structlog_configure() -> None:
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            drop_request_started,
            *SHARED_PROCESSORS,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )


@receiver(signals.bind_extra_request_metadata)
def _request_started(request, logger, log_kwargs, **kwargs):
    request._log_started = time.monotonic()


@receiver(signals.bind_extra_request_finished_metadata)
def _request_finished(request, logger, response, log_kwargs, **kwargs):
    log_kwargs["request"] = f"{request.method} {request.path}"
    started = getattr(request, "_log_started", None)
    if started is not None:
        log_kwargs["duration_ms"] = int((time.monotonic() - started) * 1000)
