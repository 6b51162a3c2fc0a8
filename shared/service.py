"""Running a worker service process: resolve Valkey, build the handler, serve until a signal."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from shared.bus.keys import Keys
from shared.bus.worker import Handler, Worker
from shared.config import ConfigError, Settings
from shared.logging import get_logger
from shared.valkey_server import HOST, PORT_FILE, ping

log = get_logger(__name__)

HandlerFactory = Callable[[Settings], AbstractAsyncContextManager[Handler]]


def resolve_valkey_url(settings: Settings) -> str:
    """VALKEY_URL, else the embedded server that `chat-agent up` started under the state folder."""
    if settings.valkey_url:
        return settings.valkey_url
    port_file = settings.state_path / "valkey" / PORT_FILE
    try:
        port = int(port_file.read_text().strip())
    except (OSError, ValueError):
        port = 0
    if port and ping(port):
        return f"redis://{HOST}:{port}/0"
    raise ConfigError("VALKEY_URL is empty and no embedded Valkey runs under STATE_DIR: set VALKEY_URL or start `chat-agent up`")


def consumer_name(service: str, given: str | None = None) -> str:
    return given or f"{service}-{socket.gethostname()}-{os.getpid()}"


async def serve_worker(settings: Settings, service: str, handler_factory: HandlerFactory, consumer: str | None = None) -> None:
    """Run one consumer of `service`'s inbox until SIGTERM/SIGINT."""
    url = resolve_valkey_url(settings)
    name = consumer_name(service, consumer)
    async with handler_factory(settings) as handler:
        worker = Worker(
            url,
            Keys(settings.key_prefix),
            service,
            handler,
            consumer=name,
            concurrency=settings.worker_concurrency,
            visibility_timeout=settings.visibility_timeout_seconds,
            max_deliveries=settings.max_deliveries,
            retention_seconds=settings.event_retention_seconds,
        )
        log.info("worker_started", inbox=Keys(settings.key_prefix).inbox(service), consumer=name)
        await worker.run_until_signal()
        log.info("worker_stopped")


