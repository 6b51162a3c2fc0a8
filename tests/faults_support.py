"""Helpers for the fault-injection tests (tests/test_faults_*.py).

A stack of real processes (tests/fixtures/stack.py) is driven over HTTP as a client
would: post messages, poll job records, read each job's SSE story, read sessions.
`check_job_outcomes` holds the bars every fault test shares: each accepted job has
ended, its story as the gateway serves it holds exactly one terminal event (the last
one), and its session shows exactly one assistant message for the user's message.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from shared.bus.keys import Keys
from shared.config import Settings
from tests.fixtures.llm_server import Reply, Status, last_user_text, tool_results
from tests.fixtures.stack import ServiceProcess, Stack, stack_settings
from tests.sse_client import SSEEvent, read_stream

FINAL = ("done", "error", "cancelled")
TERMINAL_EVENTS = ("job_done", "job_error", "job_cancelled")
LOOKUP_PREFIX = "show me"


@dataclass
class Job:
    """A job the gateway accepted (202)."""

    job_id: str
    session_id: str
    user: str
    message: str
    accepted_at: float = field(default_factory=time.monotonic)

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Anon-Id": self.user}


def fault_settings(base: Settings, redis_url: str, llm_url: str, state_dir: Path, **overrides: object) -> Settings:
    """stack_settings (visibility timeout 3 s) with a rate limit no test reaches."""
    values: dict[str, object] = {"rate_limit_per_minute": 100_000}
    values.update(overrides)
    return stack_settings(base, redis_url, llm_url, state_dir, **values)


@contextlib.contextmanager
def running_stack(settings: Settings, log_dir: Path, timeout: float = 60) -> Iterator[Stack]:
    """gateway, router, lookup and agent as processes; all stopped (or killed) afterwards."""
    stack = Stack(settings, log_dir)
    try:
        yield stack.start_all(timeout)
    finally:
        for proc in stack.processes:  # a frozen process ignores SIGTERM until it is thawed
            with contextlib.suppress(ProcessLookupError):
                if proc.alive():
                    proc.process.send_signal(signal.SIGCONT)
        stack.stop_all()


def post(base_url: str, message: str, user: str, session_id: str | None = None, timeout: float = 20) -> httpx.Response:
    body: dict[str, Any] = {"message": message}
    if session_id:
        body["session_id"] = session_id
    return httpx.post(f"{base_url}/chat/message", json=body, headers={"X-Anon-Id": user}, timeout=timeout)


def submit(base_url: str, message: str, user: str) -> Job:
    """Post a message that must be accepted; the Job."""
    reply = post(base_url, message, user)
    assert reply.status_code == 202, f"{reply.status_code}: {reply.text}"
    body = reply.json()
    return Job(body["job_id"], body["session_id"], user, message)


def wait_jobs(base_url: str, jobs: list[Job], timeout: float, poll: float = 0.2) -> dict[str, dict[str, Any]]:
    """Poll until every job's record is final; records by job id. Fails naming the stragglers.

    Polls through transient 503s (a store that is away), never past `timeout`.
    """
    records: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=base_url, timeout=10) as client:
        while True:
            for job in jobs:
                if job.job_id in records:
                    continue
                try:
                    reply = client.get(f"/chat/job/{job.job_id}", headers=job.headers)
                except httpx.TransportError:
                    continue
                if reply.status_code == 200 and reply.json()["status"] in FINAL:
                    records[job.job_id] = reply.json()
            if len(records) == len(jobs):
                return records
            if time.monotonic() > deadline:
                stuck = [j.job_id for j in jobs if j.job_id not in records]
                raise AssertionError(f"{len(stuck)} of {len(jobs)} jobs did not end within {timeout:g} s: {stuck}")
            time.sleep(poll)


def story(base_url: str, job: Job, timeout: float = 30) -> list[SSEEvent]:
    """The job's SSE story as the gateway serves it (it ends after the terminal event)."""
    return read_stream(f"{base_url}/chat/job/{job.job_id}/events", headers=job.headers, timeout=timeout)


def session(base_url: str, job: Job) -> dict[str, Any]:
    reply = httpx.get(f"{base_url}/chat/session/{job.session_id}", headers=job.headers, timeout=10)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def check_job_outcomes(
    base_url: str, jobs: list[Job], records: dict[str, dict[str, Any]]
) -> dict[str, list[SSEEvent]]:
    """The bars every fault test holds each accepted job to; the stories by job id.

    - its story has exactly one terminal event, last, matching the record's status;
    - its session (one message per session here) is [user, assistant], the assistant
      message being the job's own answer or error.
    """
    stories: dict[str, list[SSEEvent]] = {}
    for job in jobs:
        record = records[job.job_id]
        events = story(base_url, job)
        types = [e.event for e in events]
        ends = [t for t in types if t in TERMINAL_EVENTS]
        assert len(ends) == 1 and types[-1] == ends[0], f"job {job.job_id}: terminal events {ends} in {types}"
        assert {"job_done": "done", "job_error": "error", "job_cancelled": "cancelled"}[ends[0]] == record["status"]
        ids = [e.id for e in events]
        assert len(set(ids)) == len(ids), f"job {job.job_id}: an event was served twice"
        messages = session(base_url, job)["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"], f"job {job.job_id}: {messages}"
        assert messages[0]["content"] == job.message
        if record["status"] == "done":
            assert messages[1]["content"] == record["result"]["answer"]
        stories[job.job_id] = events
    return stories


# --- the scripted model -------------------------------------------------------------


def routing_reply(question: str, delay: float = 0.0) -> Reply:
    """"show me ..." is a lookup, anything else the agent."""
    if question.lower().startswith(LOOKUP_PREFIX):
        return Reply(json.dumps({"route": "lookup", "confidence": 0.95, "reasoning": "asks for a node"}), delay=delay)
    return Reply(json.dumps({"route": "agent", "confidence": 0.9, "reasoning": "needs an explanation"}), delay=delay)


def agent_answer(question: str, results: list[str]) -> str:
    """The answer the scripted agent gives once it has a tool result (it names the question)."""
    try:
        top = json.loads(results[-1])[0]["displayName"]
    except (ValueError, LookupError, TypeError):
        top = "nothing: " + results[-1][:200]
    return f"About {question!r}: the graph's closest node is {top}."


def search_then_answer(router_delay: float = 0.0, agent_delay: float = 0.0) -> Callable[[dict[str, Any]], Reply | Status]:
    """Router as routing_reply; agent: one vector_search, then an answer built from its result."""

    def script(body: dict[str, Any]) -> Reply | Status:
        question = last_user_text(body)
        if body["model"] == "router-model":
            return routing_reply(question, router_delay)
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[("vector_search", {"query": question, "k": 3})], delay=agent_delay)
        return Reply(agent_answer(question, results), delay=agent_delay, chunk_chars=16)

    return script


# --- load and processes ---------------------------------------------------------------


class Submitter(threading.Thread):
    """Posts `messages` one after the other, `gap` seconds apart, from its own thread.

    Accepted jobs go to `jobs`; every other answer (status, headers, body) to `refused`.
    """

    def __init__(self, base_url: str, messages: list[str], gap: float, user_prefix: str = "u") -> None:
        super().__init__(name="fault-submitter", daemon=True)
        self.base_url = base_url
        self.messages = messages
        self.gap = gap
        self.user_prefix = user_prefix
        self.jobs: list[Job] = []
        self.refused: list[tuple[int, dict[str, str], str]] = []
        self.transport_errors: list[str] = []

    def run(self) -> None:
        for n, message in enumerate(self.messages):
            user = f"{self.user_prefix}{n}"
            try:
                reply = post(self.base_url, message, user)
            except httpx.TransportError as exc:
                self.transport_errors.append(repr(exc))
            else:
                if reply.status_code == 202:
                    body = reply.json()
                    self.jobs.append(Job(body["job_id"], body["session_id"], user, message))
                else:
                    self.refused.append((reply.status_code, dict(reply.headers), reply.text))
            time.sleep(self.gap)


def pending_of(client: redis.Redis, keys: Keys, service: str, consumer: str) -> int:
    """How many entries of the service's inbox are delivered to `consumer` and not acknowledged."""
    rows = client.xpending_range(keys.inbox(service), service, "-", "+", 1000, consumername=consumer)
    return len(rows)


def freeze_holding_work(
    proc: ServiceProcess, client: redis.Redis, keys: Keys, at_least: int = 1, timeout: float = 20
) -> int:
    """SIGSTOP the worker at a moment it holds `at_least` delivered, unacknowledged entries.

    A frozen worker blocked in XREADGROUP still has new entries delivered to it by
    the server, so freezing and waiting a little catches it mid-job even when its
    handlers are quick. Between tries it is thawed so the pipeline keeps moving.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.process.send_signal(signal.SIGSTOP)
        settle = time.monotonic() + 0.5
        while time.monotonic() < settle:
            held = pending_of(client, keys, proc.service, proc.consumer)
            if held >= at_least:
                return held
            time.sleep(0.01)
        proc.process.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError(f"{proc.consumer} never held {at_least} entries within {timeout:g} s")


def held_jobs(client: redis.Redis, keys: Keys, service: str, consumer: str) -> list[str]:
    """Job ids of the entries delivered to `consumer` and not acknowledged."""
    from shared.bus.log import TASK_FIELD
    from shared.contracts import decode_task

    stream = keys.inbox(service)
    rows = client.xpending_range(stream, service, "-", "+", 1000, consumername=consumer)
    job_ids = []
    for row in rows:
        for _entry_id, fields in client.xrange(stream, row["message_id"], row["message_id"]):
            job_ids.append(decode_task(fields[TASK_FIELD]).job_id)
    return job_ids


class StreamReader(threading.Thread):
    """Reads a job's SSE stream in its own thread, keeping each event as it arrives,
    until the server ends the stream or the connection breaks (`error`)."""

    def __init__(self, base_url: str, job: Job, last_event_id: str | None = None) -> None:
        super().__init__(name="fault-sse-reader", daemon=True)
        self.url = f"{base_url}/chat/job/{job.job_id}/events"
        self.headers = {**job.headers, **({"Last-Event-ID": last_event_id} if last_event_id else {})}
        self.events: list[SSEEvent] = []
        self.error: Exception | None = None

    def run(self) -> None:
        frame: dict[str, str] = {}
        try:
            with httpx.stream("GET", self.url, headers=self.headers, timeout=30) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if line == "":
                        if "data" in frame:
                            self.events.append(SSEEvent(frame.get("id", ""), frame.get("event", ""), json.loads(frame["data"])))
                        frame = {}
                    elif not line.startswith(":"):
                        name, _, value = line.partition(":")
                        frame[name] = value[1:] if value.startswith(" ") else value
        except (httpx.HTTPError, ValueError) as exc:
            self.error = exc


def slow_long_answers(script: Callable[[dict[str, Any]], Reply | Status]) -> Callable[[dict[str, Any]], Reply | Status]:
    """`script`, with the agent's final answer to a question holding "[long]" streamed
    slowly (4 characters every 0.1 s) so a follower is mid-stream when a fault lands."""

    def slow(body: dict[str, Any]) -> Reply | Status:
        reply = script(body)
        if isinstance(reply, Reply) and body["model"] == "agent-model" and not reply.tool_calls and "[long]" in last_user_text(body):
            reply.chunk_chars, reply.chunk_delay = 4, 0.1
        return reply

    return slow
