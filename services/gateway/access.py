"""Who is asking, and what they may see: the X-Anon-Id header and ownership checks.

A session or job created with an X-Anon-Id answers only to that id; one created
without it answers to anyone holding its uuid. Anything else is a 404, the same
answer as for an id that does not exist.
"""

from __future__ import annotations

import re
import uuid

from starlette.requests import Request

from services.gateway.context import Gateway
from services.gateway.errors import field_error, not_found
from services.gateway.views import JobView, SessionView, read_job, read_session

ANON_HEADER = "x-anon-id"
_ANON_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def anon_id(request: Request) -> str | None:
    """The caller's user id from X-Anon-Id, None when absent; a bad value is a 400."""
    value = request.headers.get(ANON_HEADER)
    if value is None:
        return None
    if not _ANON_ID.fullmatch(value):
        raise field_error(400, "X-Anon-Id", "1 to 128 characters of letters, digits, '_', '.' or '-'")
    return value


def require_anon_id(request: Request) -> str:
    user = anon_id(request)
    if user is None:
        raise field_error(400, "X-Anon-Id", "this endpoint lists a user's sessions: send the X-Anon-Id header")
    return user


def is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except (ValueError, AttributeError, TypeError):
        return False


def may_see(owner: str | None, user: str | None) -> bool:
    return owner is None or owner == user


async def session_for(gw: Gateway, session_id: str, user: str | None) -> SessionView:
    """The live session view when `user` may see it, else a 404."""
    if not is_uuid(session_id):
        raise not_found("session")
    view = await read_session(gw.redis, gw.keys, session_id, gw.ttl)
    if view is None or view.deleted or view.session is None or not may_see(view.user_id, user):
        raise not_found("session")
    return view


async def job_for(gw: Gateway, job_id: str, user: str | None) -> JobView:
    """The job view when `user` may see it, else a 404."""
    if not is_uuid(job_id):
        raise not_found("job")
    view = await read_job(gw.redis, gw.keys, job_id, gw.ttl)
    if view is None or not may_see(view.record.user_id, user):
        raise not_found("job")
    return view
