"""HTTP calls to the gateway, and the errors a script sees as exit codes.

Every failure is a ClientError carrying the exit code and a one-line message:
4xx -> 2 (with the gateway's field and reason), 429 -> 4 (with Retry-After), no
connection -> 3 (naming the URL), 5xx -> 1.
"""

from __future__ import annotations

from typing import Any

import httpx

from services.client.exits import EXIT_BAD_INPUT, EXIT_JOB_ERROR, EXIT_RATE_LIMITED, EXIT_UNREACHABLE

ANON_HEADER = "X-Anon-Id"


class ClientError(Exception):
    """A failure with the exit code the CLI ends with."""

    exit_code = EXIT_JOB_ERROR

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class Unreachable(ClientError):
    exit_code = EXIT_UNREACHABLE


class BadRequest(ClientError):
    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, status: int, fields: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.status = status
        self.fields = fields


class RateLimited(ClientError):
    exit_code = EXIT_RATE_LIMITED

    def __init__(self, message: str, retry_after: str | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def error_detail(response: httpx.Response) -> tuple[str, list[tuple[str, str]]]:
    """The gateway's {"detail": ...} as a sentence and (field, reason) pairs."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, list):
        pairs = [(str(d.get("field", "?")), str(d.get("reason", ""))) for d in detail if isinstance(d, dict)]
        return "; ".join(f"{f}: {r}" for f, r in pairs) or response.reason_phrase, pairs
    if isinstance(detail, str) and detail:
        return detail, []
    return (response.text.strip()[:200] or response.reason_phrase), []


def check(response: httpx.Response) -> httpx.Response:
    """Raise the ClientError matching a non-2xx answer."""
    if response.is_success:
        return response
    text, fields = error_detail(response)
    status = response.status_code
    if status == 429:
        retry = response.headers.get("Retry-After")
        wait = f"; retry after {retry} s" if retry else ""
        raise RateLimited(f"rate limited by the gateway (429): {text}{wait}", retry)
    if 400 <= status < 500:
        raise BadRequest(f"the gateway refused the request ({status}): {text}", status, fields)
    raise ClientError(f"the gateway failed ({status}): {text}")


class GatewayClient:
    """Synchronous calls to one gateway as one user (X-Anon-Id)."""

    def __init__(self, base_url: str, user: str | None, *, timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {ANON_HEADER: user} if user else {}
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One call; connection failures become Unreachable naming the URL."""
        try:
            return check(self.http.request(method, path, **kwargs))
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from None

    def unreachable(self, exc: Exception) -> Unreachable:
        reason = str(exc) or type(exc).__name__
        return Unreachable(f"cannot reach the gateway at {self.base_url} ({reason}); is it running? (`chat-agent up`)")

    # chat
    def post_message(self, message: str, session_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"message": message}
        if session_id:
            body["session_id"] = session_id
        return self.request("POST", "/chat/message", json=body).json()

    def job(self, job_id: str) -> dict[str, Any]:
        return self.request("GET", f"/chat/job/{job_id}").json()

    def cancel(self, job_id: str, timeout: float = 5.0) -> str:
        """Ask the gateway to cancel; a short word for what happened (never raises)."""
        try:
            response = self.http.post(f"/chat/job/{job_id}/cancel", timeout=timeout)
        except httpx.HTTPError as exc:
            return f"not sent ({type(exc).__name__})"
        if response.status_code in (404, 405):
            return "not supported by this gateway"
        if response.status_code == 409:
            return "the job had already ended"
        return "requested" if response.is_success else f"refused ({response.status_code})"

    # sessions
    def sessions(self) -> list[dict[str, Any]]:
        return self.request("GET", "/chat/sessions").json()

    def session(self, session_id: str) -> dict[str, Any]:
        return self.request("GET", f"/chat/session/{session_id}").json()

    def rename(self, session_id: str, name: str) -> dict[str, Any]:
        return self.request("PATCH", f"/chat/session/{session_id}", json={"name": name}).json()

    def delete(self, session_id: str) -> None:
        self.request("DELETE", f"/chat/session/{session_id}")
