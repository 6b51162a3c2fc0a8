from datetime import datetime

import msgspec
import pytest

from shared.contracts import (
    ChatRequest,
    ChatResponse,
    ChatSession,
    EventRecord,
    JobRecord,
    JobStatus,
    JobTask,
    RouterDecision,
    TokenUsage,
    decode_event,
    decode_task,
    encode,
)


def test_token_usage_adds_fieldwise() -> None:
    total = TokenUsage(10, 3) + TokenUsage(5, 7)
    assert total == TokenUsage(15, 10)
    assert total.total_tokens == 25
    assert sum([TokenUsage(1, 1), TokenUsage(2, 2)], TokenUsage()) == TokenUsage(3, 3)


def test_session_round_trips_with_events() -> None:
    session = ChatSession(name="cell cycle")
    session.add("user", "What is TP53?")
    session.pending_job_id = "job-1"
    session.add_event("routing_done", {"route": "agent"})
    session.add_event("tool_call", {"name": "vector_search"})
    answer = session.add("assistant", "A tumour suppressor.", route="agent", confidence=0.9)
    assert [e.type for e in answer.events] == ["routing_done", "tool_call"]
    assert session.pending_events == [] and session.pending_job_id is None

    again = msgspec.json.decode(encode(session), type=ChatSession)
    assert again == session
    assert isinstance(again.created_at, datetime)


def test_history_for_llm_keeps_last_pairs() -> None:
    session = ChatSession()
    for i in range(15):
        session.add("user", f"q{i}")
        session.add("assistant", f"a{i}")
    history = session.history_for_llm(max_turns=3)
    assert history == [
        {"role": "user", "content": "q12"},
        {"role": "assistant", "content": "a12"},
        {"role": "user", "content": "q13"},
        {"role": "assistant", "content": "a13"},
        {"role": "user", "content": "q14"},
        {"role": "assistant", "content": "a14"},
    ]
    assert session.history_for_llm(max_turns=0) == []
    assert len(session.history_for_llm()) == 20


def test_job_record_round_trip_with_result() -> None:
    response = ChatResponse("s1", "answer", "lookup", [{"stId": "R-HSA-1"}], TokenUsage(1, 2))
    record = JobRecord("j1", "s1", "u1", True, "hi", JobStatus.done, result=response)
    again = msgspec.json.decode(encode(record), type=JobRecord)
    assert again == record
    assert again.status.is_final and not JobStatus.running.is_final


def test_stream_payloads_round_trip() -> None:
    event = EventRecord("tool_call", "j1", "s1", {"name": "graph_query"})
    assert decode_event(encode(event)) == event
    task = JobTask("j1", "s1", "hi", decision=RouterDecision("agent", 0.4, "why", TokenUsage(3, 4)))
    assert decode_task(encode(task)) == task


@pytest.mark.parametrize(
    "body, field",
    [
        (b'{"message": ""}', "message"),
        (b'{"message": 5}', "message"),
        (b'{"session_id": "x"}', "message"),
        (b'{"message": "' + b"x" * 8001 + b'"}', "message"),
        (b'{"message": "ok", "extra": 1}', "extra"),
    ],
)
def test_chat_request_rejects_bad_bodies_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(body, type=ChatRequest)
    assert field in str(info.value)
