"""hypothesis on the contracts: JSON round trips with arbitrary unicode, and request
decoding that fails only the documented way on arbitrary bytes.

- ChatSession, JobRecord, EventRecord and JobTask come back equal from their JSON,
  whatever the text (any code point but lone surrogates, which UTF-8 cannot carry),
  the event data (nested JSON values) and the times.
- ChatRequest / RenameRequest decoding of any bytes returns a value or raises
  msgspec.ValidationError / DecodeError, with one exception found here: msgspec
  0.22.0 raises UnicodeDecodeError for invalid UTF-8 inside a string or an object
  key (`{"message": "\x80"}`), which the gateway answered with a 500. decode_body
  now maps it to a 400; the test allows it only for bytes that are not UTF-8 and
  counts it. Through decode_body every input is a 400 or 422 naming field and reason.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta, timezone
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.contracts import (
    ChatRequest,
    ChatResponse,
    ChatSession,
    EventRecord,
    JobEvent,
    JobRecord,
    JobStatus,
    JobTask,
    Message,
    RenameRequest,
    RouterDecision,
    TokenUsage,
    decode_event,
    decode_task,
    encode,
)
from services.gateway.errors import ApiError, decode_body
from tests.fuzz_support import assert_all_held, record, reliability_table  # noqa: F401

ROUND_TRIPS = 300
BYTES_EXAMPLES = 1500
FUZZ = settings(max_examples=ROUND_TRIPS, deadline=None, database=None, suppress_health_check=list(HealthCheck))

text = st.text(max_size=40)  # any code point except surrogates
ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what JSON numbers msgspec reads as int
floats = st.floats(allow_nan=False, allow_infinity=False)  # NaN is encoded as null: not a round trip
json_values = st.recursive(
    st.none() | st.booleans() | ints | floats | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
data_dicts = st.dictionaries(text, json_values, max_size=5)
zones = st.integers(min_value=-23 * 60, max_value=23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
times = st.datetimes(timezones=st.one_of(st.just(timezone.utc), zones)) | st.datetimes()
routes = st.sampled_from(["lookup", "agent"])
usage = st.builds(TokenUsage, st.integers(0, 2**62), st.integers(0, 2**62))
events = st.builds(JobEvent, text, data_dicts)
messages = st.builds(Message, text, text, st.none() | routes, st.none() | floats, st.lists(events, max_size=3))
sessions = st.builds(
    ChatSession, text, st.lists(messages, max_size=4), st.none() | text, st.lists(events, max_size=3), st.none() | text, times
)
responses = st.builds(ChatResponse, text, text, routes, st.lists(data_dicts, max_size=3), usage)
records = st.builds(
    JobRecord, text, text, st.none() | text, st.booleans(), text, st.sampled_from(list(JobStatus)), times,
    st.none() | responses, st.none() | text,
)  # fmt: skip
event_records = st.builds(EventRecord, text, text, text, data_dicts, floats)
decisions = st.builds(RouterDecision, routes, floats, text, usage)
history = st.lists(st.dictionaries(st.sampled_from(["role", "content"]), text, min_size=2), max_size=4)
tasks = st.builds(JobTask, text, text, text, st.none() | text, history, st.none() | decisions, floats)

_session_decoder = msgspec.json.Decoder(ChatSession)
_record_decoder = msgspec.json.Decoder(JobRecord)
_chat_decoder = msgspec.json.Decoder(ChatRequest)
_rename_decoder = msgspec.json.Decoder(RenameRequest)


def _round_trip(name: str, strategy: st.SearchStrategy[Any], decode: Any) -> None:
    """Encode, decode and compare `ROUND_TRIPS` generated values; record the row."""
    tried: list[int] = [0]
    failures: list[str] = []
    started = time.monotonic()

    @FUZZ
    @given(strategy)
    def check(value: Any) -> None:
        tried[0] += 1
        raw = encode(value)
        back = decode(raw)
        if back != value:
            failures.append(repr(value)[:300])
        assert back == value
        json.loads(raw)  # plain JSON a client in any language can read

    try:
        check()
    finally:
        held = tried[0] - len(failures)
        record("contracts", f"{name} JSON round trip (arbitrary unicode)", tried[0], held, time.monotonic() - started)
    assert_all_held(tried[0], held, failures, name)


def test_chat_session_round_trips() -> None:
    _round_trip("ChatSession", sessions, _session_decoder.decode)


def test_job_record_round_trips() -> None:
    _round_trip("JobRecord", records, _record_decoder.decode)


def test_event_record_round_trips() -> None:
    _round_trip("EventRecord", event_records, decode_event)


def test_job_task_round_trips() -> None:
    _round_trip("JobTask", tasks, decode_task)


def _mangle(raw: bytes, cuts: list[int], junk: bytes) -> bytes:
    """Near-valid input: JSON with bytes spliced in at a few places."""
    out = raw
    for cut in cuts:
        at = cut % (len(out) + 1)
        out = out[:at] + junk + out[at:]
    return out


near_json = st.builds(
    _mangle,
    st.builds(lambda v: msgspec.json.encode(v), st.fixed_dictionaries({"message": text}, optional={"session_id": json_values, "name": json_values}) | json_values),
    st.lists(st.integers(0, 10_000), max_size=3),
    st.sampled_from([b"", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b'"', b"{", b"]", b"\\u", b"\\ud800", b"1e999999", b"-", b",,"]),
)
arbitrary_bytes = st.binary(max_size=300) | near_json | st.builds(lambda v: msgspec.json.encode(v), json_values)


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_request_decoding_fails_only_the_documented_way() -> None:
    """Any bytes: a value, or ValidationError/DecodeError; through decode_body, a 400/422 with field and reason."""
    tried = [0]
    unicode_errors = [0]
    failures: list[str] = []
    started = time.monotonic()

    @settings(max_examples=BYTES_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(arbitrary_bytes)
    def check(raw: bytes) -> None:
        tried[0] += 1
        for decoder in (_chat_decoder, _rename_decoder):
            try:
                decoder.decode(raw)
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass
            except UnicodeDecodeError as exc:
                if _is_utf8(raw):
                    failures.append(f"{decoder.type.__name__} {raw!r}: {exc!r} on valid UTF-8")
                    raise
                unicode_errors[0] += 1
            except Exception as exc:  # noqa: BLE001 - the point of the test
                failures.append(f"{decoder.type.__name__} {raw!r}: {exc!r}")
                raise
            try:
                decode_body(raw, decoder)
            except ApiError as exc:
                ok = exc.status in (400, 422) and isinstance(exc.detail, list) and all(e.field and e.reason for e in exc.detail)
                if not ok:
                    failures.append(f"decode_body {raw!r}: {exc.status} {exc.detail!r}")
                assert ok
            except Exception as exc:  # noqa: BLE001
                failures.append(f"decode_body {raw!r}: {exc!r}")
                raise

    try:
        check()
    finally:
        held = tried[0] - len(failures)
        record(
            "contracts", "ChatRequest/RenameRequest decoding of arbitrary bytes", tried[0], held, time.monotonic() - started,
            f"msgspec: UnicodeDecodeError on {unicode_errors[0]} non-UTF-8 inputs (was a 500); all 400/422",
        )  # fmt: skip
    assert_all_held(tried[0], held, failures, "request decoding")
