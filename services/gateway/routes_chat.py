"""Chat endpoints: submit a message, read a job, follow a job's events (SSE)."""

from __future__ import annotations

import re

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from shared.bus.cancel import request_cancel
from shared.bus.log import entry_id_str, publish
from shared.contracts import ChatRequest, EventRecord, JobSubmission, JobTask, new_id
from services.gateway.access import anon_id, job_for, session_for
from services.gateway.context import gateway
from services.gateway.errors import ApiError, decode_body, field_error, json_response
from services.gateway.projector import apply_inline, catch_up
from services.gateway.ratelimit import retry_after
from services.gateway.sse import job_stream
from services.gateway.views import apply_first

ROUTER_INBOX = "router"
_chat_decoder = msgspec.json.Decoder(ChatRequest)
_ENTRY_ID = re.compile(r"\d{1,20}-\d{1,20}")


def require_json(request: Request) -> None:
    """A Content-Type other than JSON is a 415 (none at all is taken as JSON).

    Browsers send form and text/plain bodies cross-site without asking first; a JSON
    type they must ask for (CORS preflight), which this gateway never grants.
    """
    value = request.headers.get("content-type")
    if value is None:
        return
    media = value.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise field_error(415, "Content-Type", f"send the body as application/json, not {value[:100]!r}")


async def read_body(request: Request, limit: int) -> bytes:
    """The JSON request body: 415 unless JSON, 413 past `limit` bytes."""
    require_json(request)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise field_error(413, "body", f"larger than {limit} bytes")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise field_error(413, "body", f"larger than {limit} bytes")
    return body


async def post_message(request: Request) -> Response:
    """Accept a message: one MULTI writes job_submitted and the router task; 202."""
    gw = gateway(request)
    settings = gw.settings
    user = anon_id(request)
    body = await read_body(request, settings.max_message_chars * 4 + 4096)
    chat: ChatRequest = decode_body(body, _chat_decoder)
    if not chat.message.strip():
        raise field_error(422, "message", "must contain more than whitespace")
    if len(chat.message) > settings.max_message_chars:
        raise field_error(422, "message", f"longer than {settings.max_message_chars} characters")
    wait = await gw.limiter.check(user, request.client.host if request.client else "unknown")
    if wait:
        raise ApiError(
            429,
            f"rate limit reached: {settings.rate_limit_per_minute} messages per minute per user, "
            f"{settings.address_rate_limit} per client address",
            {"Retry-After": retry_after(wait)},
        )
    history: list[dict[str, str]] = []
    if chat.session_id is not None:
        await session_for(gw, chat.session_id, user)  # 404 before anything else
        await catch_up(gw.redis, gw.keys, chat.session_id, gw.ttl)  # history has the latest answer
        view = await session_for(gw, chat.session_id, user)
        assert view.session is not None
        history = view.session.history_for_llm(settings.history_max_turns)
        session_id, is_new = view.session.session_id, False
    else:
        session_id, is_new = new_id(), True
    job_id = new_id()
    event = EventRecord(
        "job_submitted", job_id, session_id, {"user_id": user, "message": chat.message, "is_new_session": is_new}
    )
    task = JobTask(job_id, session_id, chat.message, user_id=user, history=history, submitted_at=event.ts)
    ids = await publish(
        gw.redis, gw.keys, [event], [(ROUTER_INBOX, task)], retention_seconds=settings.event_retention_seconds
    )
    if is_new:  # nothing to catch up and no one else writing these views yet
        await apply_first(gw.redis, gw.keys, entry_id_str(ids[0]), event, gw.ttl)
    else:
        await apply_inline(gw.redis, gw.keys, entry_id_str(ids[0]), event, gw.ttl)
    return json_response(JobSubmission(job_id, session_id), 202, {"Location": f"/chat/job/{job_id}"})


async def get_job(request: Request) -> Response:
    gw = gateway(request)
    view = await job_for(gw, request.path_params["job_id"], anon_id(request))
    return json_response(view.record)


def last_event_id(request: Request) -> str | None:
    """Last-Event-ID (header, else ?last_event_id=): a stream entry id, or a 400."""
    value = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    if not value:
        return None
    value = value.strip()
    if not _ENTRY_ID.fullmatch(value):
        raise field_error(400, "Last-Event-ID", "a stream entry id such as 1718000000000-0")
    return value


async def job_events(request: Request) -> Response:
    """text/event-stream of the job's events; resumes after Last-Event-ID."""
    gw = gateway(request)
    view = await job_for(gw, request.path_params["job_id"], anon_id(request))
    after = last_event_id(request)
    stream = job_stream(gw.redis, gw.hub, gw.keys, view, after, gw.settings.sse_ping_seconds)
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def cancel_job(request: Request) -> Response:
    """Ask a running job to stop at its next safe point: 202, or 409 once it has ended."""
    gw = gateway(request)
    view = await job_for(gw, request.path_params["job_id"], anon_id(request))
    record = view.record
    if record.status.is_final:
        raise ApiError(409, f"job {record.job_id} has already ended with status {record.status.value}")
    await request_cancel(gw.redis, gw.keys, record.job_id, record.session_id, retention_seconds=gw.settings.event_retention_seconds)
    return json_response(JobSubmission(record.job_id, record.session_id, record.status), 202)


routes = [
    Route("/chat/message", post_message, methods=["POST"]),
    Route("/chat/job/{job_id}/cancel", cancel_job, methods=["POST"]),
    Route("/chat/job/{job_id}", get_job, methods=["GET"]),
    Route("/chat/job/{job_id}/events", job_events, methods=["GET"]),
]
