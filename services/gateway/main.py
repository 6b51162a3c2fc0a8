"""`chat-agent gateway`: serve the app with uvicorn until SIGTERM/SIGINT, then stop cleanly."""

from __future__ import annotations

import argparse
import signal
from typing import Any

import msgspec
import uvicorn

from shared.config import Settings
from shared.logging import configure_logging, get_logger
from shared.service import resolve_valkey_url
from services.gateway.app import create_app

log = get_logger(__name__)
GRACE_SECONDS = 5


class GatewayServer(uvicorn.Server):
    """uvicorn's server, ending open SSE streams first when asked to stop."""

    def __init__(self, config: uvicorn.Config, app: Any) -> None:
        super().__init__(config)
        self.gateway_app = app

    async def shutdown(self, sockets: Any = None) -> None:
        # SIGTERM is the normal way to stop: exit 0 rather than die by the re-raised signal
        self._captured_signals = [s for s in self._captured_signals if s != signal.SIGTERM]
        await self.gateway_app.state.gateway.hub.close()
        await super().shutdown(sockets)


def run(settings: Settings, args: argparse.Namespace) -> int:
    configure_logging(settings, "gateway")
    settings = msgspec.structs.replace(settings, valkey_url=resolve_valkey_url(settings))
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.gateway_host,
        port=settings.gateway_port,
        lifespan="on",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=GRACE_SECONDS,
    )
    server = GatewayServer(config, app)
    log.info("gateway_listening", host=settings.gateway_host, port=settings.gateway_port)
    server.run()
    return 0 if server.started else 1
