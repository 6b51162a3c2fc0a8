"""Hostile HTTP against a real gateway process, over real sockets.

Oversized bodies (10 MB, declared or chunked), invalid UTF-8, JSON that is not an
object, deep nesting, huge and many headers, broken framing, wrong content types,
bodies that stop half way or trickle in, and thousands of sessions for one user.
Every refused request must get a 4xx with a body saying why, never a 5xx, and leave
Valkey as it was (stream lengths and key names under the test's prefix).
"""

from __future__ import annotations

import json
import select
import socket
import statistics
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from shared.bus.keys import Keys
from tests.fuzz_support import GatewayProcess, assert_all_held, gateway_process, record, reliability_table, store_state  # noqa: F401

MB = 1024 * 1024
SESSIONS = 2000


@dataclass
class Answer:
    """What came back on the socket: status 0 when the server closed without answering."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    note: str = ""

    def json(self) -> Any:
        return json.loads(self.body)


def _parse(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines or not lines[0].startswith("HTTP/"):
        return Answer(0, note=f"no HTTP answer ({len(raw)} bytes)")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return Answer(status, headers, body)


def raw_http(port: int, head: bytes, body: Iterable[bytes] = (), *, pause: float = 0.0, close_after: bool = False) -> Answer:
    """Send `head` then the body chunks (stopping as soon as the server answers), read the answer.

    close_after=True closes the connection after the chunks without waiting (a client
    that goes away half way); the answer is then Answer(0).
    """
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        sent = 0
        for chunk in body:
            if select.select([sock], [], [], 0)[0]:
                break  # the server has answered already
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
            if pause:
                time.sleep(pause)
        if close_after:
            return Answer(0, note=f"closed after {sent} bytes")
        raw = b""
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                raw += data
                answer = _parse(raw)
                if answer.status and "content-length" in answer.headers and len(answer.body) >= int(answer.headers["content-length"]):
                    break
        except (ConnectionResetError, socket.timeout) as exc:
            if not raw:
                return Answer(0, note=f"{exc.__class__.__name__} after {sent} body bytes")
        answer = _parse(raw)
        answer.note = answer.note or f"{sent} body bytes sent"
        return answer


def request_head(method: str, path: str, headers: dict[str, str] | list[tuple[str, str]] | None = None, *, extra: bytes = b"") -> bytes:
    items = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    lines = [f"{method} {path} HTTP/1.1", "Host: gateway", "Connection: close", *(f"{k}: {v}" for k, v in items)]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1") + extra + b"\r\n"


def post_json_bytes(body: bytes, content_type: str | None = "application/json", **headers: str) -> tuple[bytes, list[bytes]]:
    hdrs = {"Content-Length": str(len(body)), **headers}
    if content_type is not None:
        hdrs["Content-Type"] = content_type
    return request_head("POST", "/chat/message", hdrs), [body]


def chunked(total: int, size: int = 64 * 1024) -> Iterable[bytes]:
    """`total` bytes of a JSON-looking body in chunked transfer encoding."""
    chunk = b'{"message": "' + b"x" * (size - 13)
    sent = 0
    while sent < total:
        yield b"%x\r\n%s\r\n" % (len(chunk), chunk)
        sent += len(chunk)
    yield b"0\r\n\r\n"


@dataclass
class Case:
    """One hostile request: how to send it, which statuses are right, which field the body names."""

    name: str
    send: Callable[[GatewayProcess], Answer]
    statuses: tuple[int, ...]
    field: str | None = None  # the field the JSON error body must name; None: any clear body
    json_body: bool = True  # False where uvicorn answers before the app (plain text)


def _send(head: bytes, chunks: Iterable[bytes] = ()) -> Callable[[GatewayProcess], Answer]:
    return lambda gw: raw_http(gw.port, head, chunks)


def _post(body: bytes, content_type: str | None = "application/json", **headers: str) -> Callable[[GatewayProcess], Answer]:
    head, chunks = post_json_bytes(body, content_type, **headers)
    return _send(head, chunks)


TEN_MB = b'{"message": "' + b"x" * (10 * MB) + b'"}'
CASES: list[Case] = [
    Case("10 MB body, Content-Length declared", _post(TEN_MB), (413,), "body"),
    Case("10 MB body, chunked (no length)", _send(request_head("POST", "/chat/message", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}), chunked(10 * MB)), (413,), "body"),
    Case("Content-Length: 10 GB, no body", _send(request_head("POST", "/chat/message", {"Content-Type": "application/json", "Content-Length": str(10 * 1024 * MB)})), (413,), "body"),
    Case("invalid UTF-8 in a string", _post(b'{"message": "caf\xe9 \xff\xfe"}'), (400,), "body"),
    Case("invalid UTF-8 in a key", _post(b'{"message": "hi", "\xc3": 1}'), (400,), "body"),
    Case("truncated UTF-8 sequence", _post(b'{"message": "\xe2\x82"}'), (400,), "body"),
    Case("overlong UTF-8 encoding of '/'", _post(b'{"message": "\xc0\xaf"}'), (400,), "body"),
    Case("UTF-16 body", _post('{"message": "hi"}'.encode("utf-16")), (400,), "body"),
    Case("lone surrogate escape", _post(b'{"message": "\\ud800"}'), (400,), "body"),
    Case("JSON array", _post(b'["message", "hi"]'), (422,), "body"),
    Case("JSON string", _post(b'"hi"'), (422,), "body"),
    Case("JSON number", _post(b"42"), (422,), "body"),
    Case("JSON null", _post(b"null"), (422,), "body"),
    Case("JSON true", _post(b"true"), (422,), "body"),
    Case("message is an object", _post(b'{"message": {"text": "hi"}}'), (422,), "message"),
    Case("nested 15k deep", _post(b'{"message": "hi", "session_id": ' + b"[" * 15_000 + b"]" * 15_000 + b"}"), (422,), "session_id"),
    Case("nested 15k deep, unclosed", _post(b'{"message": "hi", "session_id": ' + b'[{"a": ' * 4_000), (422,), "session_id"),
    Case("5,000 unknown keys", _post(b'{"message": "hi", ' + b", ".join(b'"k%d": %d' % (i, i) for i in range(5000)) + b"}"), (413, 422)),
    Case("two JSON documents", _post(b'{"message": "hi"} {"message": "again"}'), (400,), "body"),
    Case("NUL bytes around the JSON", _post(b'\x00{"message": "hi"}\x00'), (400,), "body"),
    Case("empty body", _post(b""), (400,), "body"),
    Case("whitespace-only body", _post(b" \r\n\t "), (400,), "body"),
    Case("Content-Type text/plain", _post(b'{"message": "hi"}', "text/plain"), (415,), "Content-Type"),
    Case("Content-Type form-urlencoded", _post(b"message=hi", "application/x-www-form-urlencoded"), (415,), "Content-Type"),
    Case("Content-Type multipart", _post(b"--b\r\n\r\nhi\r\n--b--", "multipart/form-data; boundary=b"), (415,), "Content-Type"),
    Case("Content-Type garbage", _post(b'{"message": "hi"}', ";;;/"), (415,), "Content-Type"),
    Case("X-Anon-Id of 64 KB", _post(b'{"message": "hi"}', **{"X-Anon-Id": "a" * 65536}), (400, 413, 431), None, False),
    Case("X-Anon-Id of 8 KB", _post(b'{"message": "hi"}', **{"X-Anon-Id": "a" * 8192}), (400,), "X-Anon-Id"),
    Case("X-Anon-Id with invalid UTF-8", _send(request_head("POST", "/chat/message", {"Content-Type": "application/json", "Content-Length": "17"}, extra=b"X-Anon-Id: \xff\xfe\xfd\r\n"), [b'{"message": "hi"}']), (400,), "X-Anon-Id"),
    Case("X-Anon-Id with spaces and quotes", _post(b'{"message": "hi"}', **{"X-Anon-Id": "a b'\"<script>"}), (400,), "X-Anon-Id"),
    Case("10,000 headers (300 KB)", _send(request_head("POST", "/chat/message", [("Content-Type", "application/json"), ("Content-Length", "17"), *((f"X-Junk-{i}", "y" * 20) for i in range(10_000))]), [b'{"message": "hi"}']), (400, 413, 431), None, False),
    Case("1 MB header", _post(b'{"message": "hi"}', **{"X-Junk": "z" * MB}), (400, 413, 431), None, False),
    Case("NUL in a header", _send(request_head("POST", "/chat/message", {"Content-Type": "application/json", "Content-Length": "17"}, extra=b"X-Anon-Id: a\x00b\r\n"), [b'{"message": "hi"}']), (400,), None, False),
    Case("two different Content-Lengths", _send(request_head("POST", "/chat/message", [("Content-Type", "application/json"), ("Content-Length", "17"), ("Content-Length", "5")]), [b'{"message": "hi"}']), (400,), None, False),
    Case("Content-Length not a number", _send(request_head("POST", "/chat/message", {"Content-Type": "application/json", "Content-Length": "abc"}), [b'{"message": "hi"}']), (400,), None, False),
    Case("bad Last-Event-ID", lambda gw: raw_http(gw.port, request_head("GET", "/chat/job/00000000-0000-4000-8000-000000000000/events", {"Last-Event-ID": "x" * 5000})), (400, 404)),
    Case("path with invalid UTF-8 escape", lambda gw: raw_http(gw.port, request_head("GET", "/chat/session/%FF%FE", {})), (404,)),
    Case("unknown method", lambda gw: raw_http(gw.port, request_head("BREW", "/chat/message", {"Content-Length": "0"})), (405,)),
    Case("PATCH session 10 MB (unknown id)", lambda gw: raw_http(gw.port, request_head("PATCH", "/chat/session/00000000-0000-4000-8000-000000000000", {"Content-Type": "application/json", "Content-Length": str(len(TEN_MB))}), [TEN_MB]), (404, 413)),
    Case("limit=10**30 on the session list", lambda gw: raw_http(gw.port, request_head("GET", "/chat/sessions?limit=" + "9" * 30, {"X-Anon-Id": "u"})), (422,), "limit"),
]  # fmt: skip


def _clear(answer: Answer, case: Case) -> str:
    """'' when the answer is a clear refusal, else what is wrong with it."""
    if answer.status not in case.statuses:
        return f"status {answer.status} ({answer.note}), wanted {case.statuses}: {answer.body[:200]!r}"
    if not answer.body.strip():
        return "empty body"
    if not case.json_body:
        return ""
    try:
        detail = answer.json()["detail"]
    except (ValueError, KeyError, TypeError):
        return f"not an error body: {answer.body[:200]!r}"
    if case.field is not None:
        fields = [d.get("field") for d in detail] if isinstance(detail, list) else []
        if case.field not in fields:
            return f"does not name {case.field!r}: {detail!r}"
        if not all(d.get("reason") for d in detail):
            return f"no reason: {detail!r}"
    return ""


def test_hostile_requests_are_refused_clearly_and_change_nothing(redis_url: str, keys: Keys, tmp_path: Path) -> None:
    failures: list[str] = []
    held = 0
    started = time.monotonic()
    client = redis.Redis.from_url(redis_url)
    try:
        with gateway_process(redis_url, keys, tmp_path / "gateway.log") as gw:
            baseline = httpx.post(f"{gw.url}/chat/message", json={"message": "a first message"}, headers={"X-Anon-Id": "u"})
            assert baseline.status_code == 202, baseline.text
            for case in CASES:
                before = store_state(client, keys)
                answer = case.send(gw)
                after = store_state(client, keys)
                wrong = _clear(answer, case)
                if not wrong and after != before:
                    wrong = f"wrote something: {before.describe_change(after)}"
                if wrong:
                    failures.append(f"{case.name}: {wrong}")
                else:
                    held += 1
            alive = httpx.get(f"{gw.url}/healthz", timeout=5).status_code == 200
            server_errors = gw.server_errors()
    finally:
        client.close()
    record(
        "hostile HTTP", "bodies, encodings, JSON shapes, headers, framing, content types", len(CASES), held,
        time.monotonic() - started, "4xx with a reason, nothing written; " + ("gateway alive after" if alive else "gateway DOWN after"),
    )  # fmt: skip
    assert alive
    assert_all_held(len(CASES), held, failures + server_errors, "hostile requests")


def test_bodies_that_stop_half_way_or_trickle(redis_url: str, keys: Keys, tmp_path: Path) -> None:
    """A client that goes away mid-body writes nothing; a slow but complete body is accepted."""
    client = redis.Redis.from_url(redis_url)
    started = time.monotonic()
    failures: list[str] = []
    tried = held = 0
    body = b'{"message": "a slow but honest question"}'
    try:
        with gateway_process(redis_url, keys, tmp_path / "gateway.log") as gw:
            before = store_state(client, keys)
            for cut in (0, 1, len(body) // 2, len(body) - 1):
                tried += 1
                head = request_head("POST", "/chat/message", {"Content-Type": "application/json", "Content-Length": str(len(body))})
                raw_http(gw.port, head, [body[:cut]] if cut else [], close_after=True)
                time.sleep(0.2)
                after = store_state(client, keys)
                if after != before:
                    failures.append(f"cut at {cut}: {before.describe_change(after)}")
                else:
                    held += 1
            tried += 1  # chunked, closed before the last chunk
            head = request_head("POST", "/chat/message", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
            raw_http(gw.port, head, [b"%x\r\n%s\r\n" % (len(body), body)], close_after=True)
            time.sleep(0.2)
            after = store_state(client, keys)
            held += after == before
            if after != before:
                failures.append(f"chunked without the last chunk: {before.describe_change(after)}")
            tried += 1  # a complete body, one byte every 20 ms
            head = request_head("POST", "/chat/message", {"Content-Type": "application/json", "Content-Length": str(len(body)), "X-Anon-Id": "slow"})
            answer = raw_http(gw.port, head, [body[i : i + 1] for i in range(len(body))], pause=0.02)
            if answer.status == 202 and "job_id" in answer.json():
                held += 1
            else:
                failures.append(f"slow body: {answer.status} {answer.body[:200]!r}")
            server_errors = gw.server_errors()
    finally:
        client.close()
    record("hostile HTTP", "bodies cut half way (nothing written) or trickled in (accepted)", tried, held, time.monotonic() - started)
    assert_all_held(tried, held, failures + server_errors, "partial bodies")


def _timed_list(url: str, user: str, query: str = "") -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    reply = httpx.get(f"{url}/chat/sessions{query}", headers={"X-Anon-Id": user}, timeout=30)
    return time.perf_counter() - started, reply


def test_thousands_of_sessions_for_one_user(redis_url: str, keys: Keys, tmp_path: Path) -> None:
    """2,000 new sessions for one user: the list stays right, bounded in size and time, private."""
    started = time.monotonic()
    failures: list[str] = []
    with gateway_process(redis_url, keys, tmp_path / "gateway.log") as gw:
        headers = {"X-Anon-Id": "hoarder"}

        def post_many(numbers: range) -> list[tuple[int, str]]:
            out = []
            with httpx.Client(base_url=gw.url, timeout=30) as http:
                for i in numbers:
                    reply = http.post("/chat/message", json={"message": f"question {i}"}, headers=headers)
                    out.append((reply.status_code, reply.json()["session_id"] if reply.status_code == 202 else reply.text))
            return out

        post_started = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as pool:
            chunks = [range(i, min(i + SESSIONS // 4, SESSIONS)) for i in range(0, SESSIONS, SESSIONS // 4)]
            results = [r for rs in pool.map(post_many, chunks) for r in rs]
        post_seconds = time.monotonic() - post_started
        accepted = [sid for status, sid in results if status == 202]
        if len(accepted) != SESSIONS:
            failures.append(f"{SESSIONS - len(accepted)} POSTs refused: {[r for r in results if r[0] != 202][:3]}")
        newest = httpx.post(f"{gw.url}/chat/message", json={"message": "the newest"}, headers=headers).json()["session_id"]

        timings = [_timed_list(gw.url, "hoarder") for _ in range(5)]
        full = timings[-1][1]
        listed = full.json()
        small_t, small = _timed_list(gw.url, "hoarder", "?limit=10")
        other_t, other = _timed_list(gw.url, "someone-else")
        over_t, over = _timed_list(gw.url, "hoarder", "?limit=1001")
        server_errors = gw.server_errors()

    p50 = statistics.median(t for t, _ in timings)
    checks = {
        "list answers 200": full.status_code == 200,
        "at most 1000 listed": len(listed) == 1000,
        "newest first": listed[0]["session_id"] == newest
        and all(a["last_activity"] >= b["last_activity"] for a, b in zip(listed, listed[1:])),
        "no duplicates": len({s["session_id"] for s in listed}) == len(listed),
        "only the user's own": {s["session_id"] for s in listed} <= {*accepted, newest},
        "each holds its one message": all(s["message_count"] == 1 for s in listed),
        "?limit=10 gives the 10 newest": small.status_code == 200 and [s["session_id"] for s in small.json()] == [s["session_id"] for s in listed[:10]],
        "another user sees none": other.status_code == 200 and other.json() == [],
        "?limit=1001 is a 422 naming limit": over.status_code == 422 and over.json()["detail"][0]["field"] == "limit",
        "size bounded (< 300 KB)": len(full.content) < 300_000,
        "time bounded (p50 < 1 s)": p50 < 1.0,
        "every POST accepted": not failures,
        "no 5xx logged": not server_errors,
    }
    held = sum(checks.values())
    record(
        "hostile HTTP", f"{SESSIONS:,} sessions for one user, then the list", len(checks), held, time.monotonic() - started,
        f"{SESSIONS / post_seconds:.0f} POSTs/s; list of 1000: {len(full.content) // 1024} KB, p50 {p50 * 1000:.0f} ms;"
        f" limit=10 {small_t * 1000:.0f} ms",
    )  # fmt: skip
    bad = [name for name, ok in checks.items() if not ok]
    assert_all_held(len(checks), held, bad + failures + server_errors, "thousands of sessions")
