"""The floor for bench/gateway_load.py: a bare Starlette endpoint doing one XADD.

    python bench/floor_app.py --port P --valkey URL [--prefix bench-floor:]

POST /chat/message reads the body, appends it to one stream (one XADD through
the gateway's Valkey client) and answers 202 with a small JSON body, served by uvicorn with
the gateway's own settings (no access log, default loop and HTTP parser).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from services.gateway.app import gateway_client  # noqa: E402


def create_app(valkey_url: str, prefix: str) -> Starlette:
    client = gateway_client(valkey_url)  # the gateway's own bounded pool
    stream = f"{prefix}floor"

    async def post(request: Request) -> Response:
        body = await request.body()
        job_id = str(uuid.uuid4())
        await client.xadd(stream, {b"t": body})
        return JSONResponse({"job_id": job_id}, status_code=202)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/chat/message", post, methods=["POST"]), Route("/healthz", healthz)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--valkey", required=True)
    p.add_argument("--prefix", default="bench-floor:")
    args = p.parse_args()
    app = create_app(args.valkey, args.prefix)
    uvicorn.run(app, host="127.0.0.1", port=args.port, lifespan="on", log_config=None, access_log=False)


if __name__ == "__main__":
    main()
