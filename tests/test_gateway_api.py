"""Gateway REST: submit, read-your-writes, validation, rate limit, ownership, sessions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from shared.contracts import EventRecord, decode_task
from services.gateway.app import create_app
from tests.fixtures.gateway import ALICE, BOB, GatewayUnderTest, gateway_settings, job_story


async def test_post_is_accepted_and_readable_at_once(gateway: GatewayUnderTest) -> None:
    answer = await gateway.post("What is apoptosis?", ALICE)
    assert answer.status_code == 202, answer.text
    job = answer.json()
    assert job["status"] == "pending" and uuid.UUID(job["job_id"]) and uuid.UUID(job["session_id"])
    assert answer.headers["location"] == f"/chat/job/{job['job_id']}"

    session = (await gateway.client.get(f"/chat/session/{job['session_id']}", headers=ALICE)).json()
    assert [(m["role"], m["content"]) for m in session["messages"]] == [("user", "What is apoptosis?")]
    assert session["pending_job_id"] == job["job_id"]
    record = (await gateway.client.get(f"/chat/job/{job['job_id']}", headers=ALICE)).json()
    assert record["status"] == "pending" and record["user_id"] == "alice" and record["is_new_session"] is True

    assert await gateway.counts() == (1, 1)
    [(_, fields)] = await gateway.redis.xrange(gateway.keys.inbox("router"))
    task = decode_task(fields[b"t"])
    assert (task.job_id, task.session_id, task.message, task.user_id, task.history) == (
        job["job_id"], job["session_id"], "What is apoptosis?", "alice", []
    )


async def test_follow_up_carries_history_and_the_answer_lands(gateway_factory: Any) -> None:
    gw = await gateway_factory(project=False)  # nothing projects but the requests themselves
    first = (await gw.post("first question", ALICE)).json()
    sid = first["session_id"]
    await gw.emit(*job_story(first["job_id"], sid, answer="first answer"))
    second = await gw.post("second question", ALICE, sid)
    assert second.status_code == 202
    # the earlier answer is caught up before the new message: order and history hold
    session = (await gw.client.get(f"/chat/session/{sid}", headers=ALICE)).json()
    assert [m["content"] for m in session["messages"]] == ["first question", "first answer", "second question"]
    assert session["messages"][1]["route"] == "agent" and session["messages"][1]["confidence"] == pytest.approx(0.9)
    entries = await gw.redis.xrange(gw.keys.inbox("router"))
    task = decode_task(entries[-1][1][b"t"])
    assert task.history == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
    ]
    record = (await gw.client.get(f"/chat/job/{second.json()['job_id']}", headers=ALICE)).json()
    assert record["is_new_session"] is False


BAD_BODIES: list[tuple[Any, int, str, str]] = [
    (b"{not json", 400, "body", "malformed JSON"),
    (b"", 400, "body", "JSON object is required"),
    (b"[1, 2]", 422, "body", "expected `object`"),
    (b"{}", 422, "message", "missing required field"),
    (b'{"message": 5}', 422, "message", "expected `str`"),
    (b'{"message": ""}', 422, "message", "length >= 1"),
    (b'{"message": "  \\n\\t "}', 422, "message", "more than whitespace"),
    (b'{"message": "' + b"x" * 8001 + b'"}', 422, "message", "length <= 8000"),
    (b'{"message": "hi", "extra": 1}', 422, "extra", "unknown field"),
    (b'{"message": "hi", "session_id": 7}', 422, "session_id", "expected `str | null`"),
]


@pytest.mark.parametrize(("body", "status", "field", "reason"), BAD_BODIES)
async def test_bad_bodies_are_refused_with_field_and_reason(
    gateway: GatewayUnderTest, body: bytes, status: int, field: str, reason: str
) -> None:
    answer = await gateway.client.post("/chat/message", content=body, headers={**ALICE, "content-type": "application/json"})
    assert answer.status_code == status, answer.text
    [error] = answer.json()["detail"]
    assert error["field"] == field and reason in error["reason"], error
    assert await gateway.counts() == (0, 0)


async def test_configured_message_limit_and_bad_headers(gateway_factory: Any) -> None:
    gw = await gateway_factory(max_message_chars=10)
    long = await gw.post("x" * 11, ALICE)
    assert long.status_code == 422 and long.json()["detail"][0]["reason"] == "longer than 10 characters"
    for bad in ("", "x" * 129, "spaces here", "a/b"):
        answer = await gw.post("hello", {"X-Anon-Id": bad})
        assert answer.status_code == 400 and answer.json()["detail"][0]["field"] == "X-Anon-Id", bad
    huge = await gw.client.post("/chat/message", content=b"x" * 100_000)
    assert huge.status_code == 413
    for sid in (str(uuid.uuid4()), "not-a-uuid", str(uuid.uuid4()).upper()):
        answer = await gw.post("hello", ALICE, sid)
        assert answer.status_code == 404 and answer.json() == {"detail": "session not found"}
    assert await gw.counts() == (0, 0)


async def test_rate_limit_per_user_and_per_address(gateway_factory: Any) -> None:
    gw = await gateway_factory(rate_limit_per_minute=3)
    for _ in range(3):
        assert (await gw.post("hi", ALICE)).status_code == 202
    refused = await gw.post("hi", ALICE)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert "3 messages per minute" in refused.json()["detail"]
    assert await gw.counts() == (3, 3)
    assert (await gw.post("hi", BOB)).status_code == 202  # another user has their own budget
    for _ in range(3):
        assert (await gw.post("hi")).status_code == 202  # anonymous: counted by address
    assert (await gw.post("hi")).status_code == 429
    assert await gw.counts() == (7, 7)


async def test_other_users_get_404_everywhere(gateway: GatewayUnderTest) -> None:
    job = (await gateway.post("mine", ALICE)).json()
    sid, jid = job["session_id"], job["job_id"]
    for headers in (BOB, {}):
        assert (await gateway.client.get(f"/chat/session/{sid}", headers=headers)).status_code == 404
        assert (await gateway.client.get(f"/chat/job/{jid}", headers=headers)).status_code == 404
        assert (await gateway.client.get(f"/chat/job/{jid}/events", headers=headers)).status_code == 404
        assert (await gateway.client.patch(f"/chat/session/{sid}", json={"name": "x"}, headers=headers)).status_code == 404
        assert (await gateway.client.delete(f"/chat/session/{sid}", headers=headers)).status_code == 404
        assert (await gateway.post("mine too", headers, sid)).status_code == 404
    unknown = await gateway.client.get(f"/chat/session/{uuid.uuid4()}", headers=BOB)
    assert unknown.json() == (await gateway.client.get(f"/chat/session/{sid}", headers=BOB)).json()
    assert (await gateway.client.get("/chat/sessions", headers=BOB)).json() == []
    assert [s["session_id"] for s in (await gateway.client.get("/chat/sessions", headers=ALICE)).json()] == [sid]
    assert await gateway.counts() == (1, 1)


async def test_anonymous_sessions_answer_to_their_uuid(gateway: GatewayUnderTest) -> None:
    job = (await gateway.post("anonymous"))
    sid = job.json()["session_id"]
    for headers in ({}, BOB):
        assert (await gateway.client.get(f"/chat/session/{sid}", headers=headers)).status_code == 200
    assert (await gateway.post("again", BOB, sid)).status_code == 202


async def test_rename_list_and_delete(gateway: GatewayUnderTest) -> None:
    first = (await gateway.post("one", ALICE)).json()["session_id"]
    second = (await gateway.post("two", ALICE)).json()["session_id"]
    listed = (await gateway.client.get("/chat/sessions", headers=ALICE)).json()
    assert [s["session_id"] for s in listed] == [second, first]
    assert listed[0]["message_count"] == 1 and listed[0]["name"] is None

    renamed = await gateway.client.patch(f"/chat/session/{first}", json={"name": "  Apoptosis  "}, headers=ALICE)
    assert renamed.status_code == 200 and renamed.json()["name"] == "Apoptosis"
    listed = (await gateway.client.get("/chat/sessions", headers=ALICE)).json()
    assert [(s["session_id"], s["name"]) for s in listed] == [(first, "Apoptosis"), (second, None)]

    for body, field in (({"name": ""}, "name"), ({"name": " "}, "name"), ({"nom": "x"}, "name"), ({"name": 3}, "name")):
        bad = await gateway.client.patch(f"/chat/session/{first}", json=body, headers=ALICE)
        assert bad.status_code == 422 and bad.json()["detail"][0]["field"] in (field, "nom"), bad.text

    assert (await gateway.client.delete(f"/chat/session/{first}", headers=ALICE)).status_code == 204
    assert (await gateway.client.get(f"/chat/session/{first}", headers=ALICE)).status_code == 404
    assert (await gateway.client.delete(f"/chat/session/{first}", headers=ALICE)).status_code == 404
    assert (await gateway.post("more", ALICE, first)).status_code == 404
    assert [s["session_id"] for s in (await gateway.client.get("/chat/sessions", headers=ALICE)).json()] == [second]
    types = [f[b"e"] for _, f in await gateway.redis.xrange(gateway.keys.events)]
    assert sum(b"session_renamed" in t for t in types) == 1 and sum(b"session_deleted" in t for t in types) == 1


async def test_sessions_list_needs_the_header(gateway: GatewayUnderTest) -> None:
    answer = await gateway.client.get("/chat/sessions")
    assert answer.status_code == 400
    assert answer.json()["detail"][0]["field"] == "X-Anon-Id"
    assert (await gateway.client.get("/chat/sessions?limit=0", headers=ALICE)).status_code == 422


async def test_openapi_lists_every_endpoint(gateway: GatewayUnderTest) -> None:
    spec = (await gateway.client.get("/openapi.json")).json()
    served = {
        (route.path, method.lower())
        for route in gateway.app.routes
        for method in getattr(route, "methods", set()) - {"HEAD"}
    }
    documented = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert served == documented
    schemas = spec["components"]["schemas"]
    assert {"ChatRequest", "RenameRequest", "JobSubmission", "JobRecord", "ChatSession", "SessionSummary", "ErrorBody"} <= set(schemas)
    post = spec["paths"]["/chat/message"]["post"]
    assert {"202", "400", "404", "422", "429", "503"} <= set(post["responses"])


async def test_valkey_away_is_a_503_not_a_trace(redis_url: str, keys: Any) -> None:
    import httpx

    settings = gateway_settings("redis://127.0.0.1:9/0", keys)
    app = create_app(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        answer = await client.post("/chat/message", json={"message": "hi"}, headers=ALICE)
        assert answer.status_code == 503
        assert answer.headers["retry-after"] == "5"
        assert answer.json() == {"detail": "the store is unavailable, try again shortly"}
        assert (await client.get("/healthz")).status_code == 200


async def test_unknown_job_and_bad_ids(gateway: GatewayUnderTest) -> None:
    for path in (f"/chat/job/{uuid.uuid4()}", "/chat/job/nope", "/chat/session/../x", f"/chat/job/{uuid.uuid4()}/events"):
        assert (await gateway.client.get(path, headers=ALICE)).status_code == 404, path
    job = (await gateway.post("hi", ALICE)).json()
    bad_resume = await gateway.client.get(f"/chat/job/{job['job_id']}/events", headers={**ALICE, "Last-Event-ID": "x"})
    assert bad_resume.status_code == 400


async def test_session_events_ignore_a_deleted_session(gateway: GatewayUnderTest) -> None:
    job = (await gateway.post("hi", ALICE)).json()
    sid = job["session_id"]
    assert (await gateway.client.delete(f"/chat/session/{sid}", headers=ALICE)).status_code == 204
    await gateway.emit(*job_story(job["job_id"], sid), EventRecord("session_renamed", "", sid, {"name": "late"}))
    await gateway.projected()
    raw = await gateway.redis.get(gateway.keys.session(sid))
    assert raw == b'{"deleted":true}'
    assert 0 < await gateway.redis.ttl(gateway.keys.session(sid)) <= gateway.settings.session_ttl_seconds
    record = (await gateway.client.get(f"/chat/job/{job['job_id']}", headers=ALICE)).json()
    assert record["status"] == "done"


async def test_new_user_ids_do_not_escape_the_address_limit(gateway_factory: Any) -> None:
    """A client that sends a fresh X-Anon-Id with every message is held by its address."""
    gw = await gateway_factory(rate_limit_per_minute=2, rate_limit_per_address_per_minute=5)
    answers = [
        (await gw.client.post("/chat/message", json={"message": "hi"}, headers={"X-Anon-Id": f"user-{i}"})).status_code
        for i in range(7)
    ]
    assert answers == [202] * 5 + [429] * 2


async def test_sessions_list_pages_with_limit_and_offset(gateway: GatewayUnderTest) -> None:
    made = [(await gateway.post(f"question {i}", ALICE)).json()["session_id"] for i in range(5)]
    newest_first = list(reversed(made))
    pages = []
    for offset in (0, 2, 4):
        reply = await gateway.client.get(f"/chat/sessions?limit=2&offset={offset}", headers=ALICE)
        assert reply.status_code == 200 and reply.headers["x-total-count"] == "5"
        pages += [s["session_id"] for s in reply.json()]
    assert pages == newest_first
    past = await gateway.client.get("/chat/sessions?offset=10", headers=ALICE)
    assert past.json() == [] and past.headers["x-total-count"] == "5"
    for bad in ("offset=-1", "offset=x", "limit=0", "limit=1001"):
        refused = await gateway.client.get(f"/chat/sessions?{bad}", headers=ALICE)
        assert refused.status_code == 422, bad
