"""structlog set-up: JSON lines (or console) with job_id / session_id bound per job."""

from __future__ import annotations

import logging
import sys

import structlog

from shared.config import Settings


def configure_logging(settings: Settings, service: str) -> None:
    level = getattr(logging, settings.log_level.upper(), logging.INFO)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(message)s")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if settings.log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)


def get_logger(name: str | None = None) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)


def bind_job(job_id: str, session_id: str) -> None:
    """Bind job and session ids to every log line of the current task."""
    structlog.contextvars.bind_contextvars(job_id=job_id, session_id=session_id)


def unbind_job() -> None:
    structlog.contextvars.unbind_contextvars("job_id", "session_id")
