"""Error answers: one JSON shape, {"detail": ...}, and the handlers that produce it.

Field errors are {"detail": [{"field": ..., "reason": ...}]}; other errors carry a
sentence. Valkey out of reach is a 503 with Retry-After, never a stack trace.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from shared.logging import get_logger

log = get_logger(__name__)

_encoder = msgspec.json.Encoder()
UNAVAILABLE_RETRY_AFTER = 5


class FieldError(msgspec.Struct):
    field: str
    reason: str


class ErrorBody(msgspec.Struct):
    """Every error answer: a sentence, or the list of fields at fault."""

    detail: str | list[FieldError]


class ApiError(Exception):
    """Raised by a route to answer with `status` and an ErrorBody."""

    def __init__(self, status: int, detail: str | list[FieldError], headers: dict[str, str] | None = None) -> None:
        super().__init__(detail if isinstance(detail, str) else "; ".join(f"{e.field}: {e.reason}" for e in detail))
        self.status = status
        self.detail = detail
        self.headers = headers or {}


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_encoder.encode(body), status_code=status, headers=headers, media_type="application/json")


def error_response(status: int, detail: str | list[FieldError], headers: dict[str, str] | None = None) -> Response:
    return json_response(ErrorBody(detail), status, headers)


def field_error(status: int, field: str, reason: str) -> ApiError:
    return ApiError(status, [FieldError(field, reason)])


def not_found(what: str) -> ApiError:
    return ApiError(404, f"{what} not found")


_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_NAMED = re.compile(r"field `(?P<name>[^`]+)`")


def validation_error(exc: msgspec.ValidationError) -> ApiError:
    """A msgspec validation error as a 422 naming the field and the reason."""
    text = str(exc)
    field = "body"
    match = _AT.search(text)
    if match:
        text = text[: match.start()]
        field = match.group("path").lstrip(".") or "body"
    named = _NAMED.search(text)
    if named and field == "body":
        field = named.group("name")
    reason = text[0].lower() + text[1:] if text else "invalid"
    return ApiError(422, [FieldError(field, reason)])


def decode_body(raw: bytes, decoder: msgspec.json.Decoder[Any]) -> Any:
    """Decode a JSON body: malformed JSON or bad UTF-8 is a 400, a wrong shape a 422."""
    if not raw.strip():
        raise field_error(400, "body", "a JSON object is required")
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise validation_error(exc) from None
    except msgspec.DecodeError as exc:
        raise field_error(400, "body", f"malformed JSON: {exc}") from None
    except UnicodeDecodeError as exc:  # msgspec raises it for invalid UTF-8 in a string or key
        raise field_error(400, "body", f"not valid UTF-8: {exc.reason} at byte {exc.start} of a string") from None


async def api_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.detail, exc.headers)


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))


async def redis_error_handler(request: Request, exc: Exception) -> Response:
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
        log.warning("valkey_unavailable", path=request.url.path, error=str(exc))
        return error_response(
            503, "the store is unavailable, try again shortly", {"Retry-After": str(UNAVAILABLE_RETRY_AFTER)}
        )
    log.error("valkey_error", path=request.url.path, error=str(exc))
    return error_response(500, "internal error")


async def client_gone_handler(request: Request, exc: Exception) -> Response:
    """The client closed the connection mid-body: nothing was done, nobody reads the answer."""
    log.info("client_disconnected", path=request.url.path)
    return error_response(400, "the connection closed before the body was complete")


async def server_error_handler(request: Request, exc: Exception) -> Response:
    log.error("unhandled_error", path=request.url.path, error=repr(exc))
    return error_response(500, "internal error")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    ApiError: api_error_handler,
    ClientDisconnect: client_gone_handler,
    HTTPException: http_error_handler,
    RedisError: redis_error_handler,
    OSError: redis_error_handler,
    Exception: server_error_handler,
}
