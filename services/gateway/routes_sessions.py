"""Session endpoints: read, list a user's, rename, delete.

Rename and delete are events on the log like everything else (session_renamed,
session_deleted), applied inline so the answer already shows them.
"""

from __future__ import annotations

from datetime import datetime, timezone

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shared.bus.log import entry_id_str, publish
from shared.contracts import EventRecord, RenameRequest
from services.gateway.access import anon_id, require_anon_id, session_for
from services.gateway.context import Gateway, gateway
from services.gateway.errors import decode_body, field_error, json_response, not_found
from services.gateway.projector import apply_inline
from services.gateway.routes_chat import read_body
from services.gateway.views import decode_session_view, read_session

MAX_LISTED = 1000
_rename_decoder = msgspec.json.Decoder(RenameRequest)


class SessionSummary(msgspec.Struct):
    """One line of GET /chat/sessions."""

    session_id: str
    name: str | None
    created_at: datetime
    last_activity: datetime
    message_count: int


async def get_session(request: Request) -> Response:
    gw = gateway(request)
    view = await session_for(gw, request.path_params["session_id"], anon_id(request))
    return json_response(view.session)


async def list_sessions(request: Request) -> Response:
    """This user's sessions, newest activity first, a page at a time (?limit= up to 1000,
    default 1000; ?offset= sessions to skip; X-Total-Count says how many there are)."""
    gw = gateway(request)
    user = require_anon_id(request)
    raw_limit = request.query_params.get("limit", str(MAX_LISTED))
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LISTED:
        raise field_error(422, "limit", f"an integer from 1 to {MAX_LISTED}")
    raw_offset = request.query_params.get("offset", "0")
    if not raw_offset.isdigit() or len(raw_offset) > 9:
        raise field_error(422, "offset", "an integer from 0 to 999999999")
    offset, limit = int(raw_offset), int(raw_limit)
    index = gw.keys.user_sessions(user)
    async with gw.redis.pipeline(transaction=False) as pipe:
        pipe.zcard(index)
        pipe.zrevrange(index, offset, offset + limit - 1)
        total, ids = await pipe.execute()
    headers = {"X-Total-Count": str(total)}
    if not ids:
        return json_response([], headers=headers)
    raws = await gw.redis.mget([gw.keys.session(i.decode()) for i in ids])
    out: list[SessionSummary] = []
    for raw in raws:
        view = decode_session_view(raw)
        if view is None or view.deleted or view.session is None or view.user_id != user:
            continue
        chat = view.session
        out.append(
            SessionSummary(
                chat.session_id,
                chat.name,
                chat.created_at,
                datetime.fromtimestamp(view.updated_at, timezone.utc),
                len(chat.messages),
            )
        )
    return json_response(out, headers=headers)


async def _emit(gw: Gateway, event: EventRecord) -> None:
    ids = await publish(gw.redis, gw.keys, [event], retention_seconds=gw.settings.event_retention_seconds)
    await apply_inline(gw.redis, gw.keys, entry_id_str(ids[0]), event, gw.ttl)


async def rename_session(request: Request) -> Response:
    gw = gateway(request)
    user = anon_id(request)
    view = await session_for(gw, request.path_params["session_id"], user)
    rename: RenameRequest = decode_body(await read_body(request, 16_384), _rename_decoder)
    name = rename.name.strip()
    if not name:
        raise field_error(422, "name", "must contain more than whitespace")
    assert view.session is not None
    await _emit(gw, EventRecord("session_renamed", "", view.session.session_id, {"name": name}))
    fresh = await read_session(gw.redis, gw.keys, view.session.session_id, gw.ttl)
    if fresh is None or fresh.session is None:
        raise not_found("session")  # deleted meanwhile
    return json_response(fresh.session)


async def delete_session(request: Request) -> Response:
    gw = gateway(request)
    view = await session_for(gw, request.path_params["session_id"], anon_id(request))
    assert view.session is not None
    await _emit(gw, EventRecord("session_deleted", "", view.session.session_id, {}))
    return Response(status_code=204)


_SESSION_METHODS = {"GET": get_session, "HEAD": get_session, "PATCH": rename_session, "DELETE": delete_session}


async def session_endpoint(request: Request) -> Response:
    """One route for the three methods, so a 405 lists them all in Allow."""
    return await _SESSION_METHODS[request.method](request)


routes = [
    Route("/chat/sessions", list_sessions, methods=["GET"]),
    Route("/chat/session/{session_id}", session_endpoint, methods=["GET", "PATCH", "DELETE"]),
]
