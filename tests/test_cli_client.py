"""`chat-agent ask` and `chat-agent sessions` as a user runs them: subprocesses against a
real stack (Valkey, TuringDB with the fixture graph, the scripted LLM over HTTP, and
gateway, router, lookup and agent each as its own process)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from shared.config import PROJECT_ROOT, Settings
from services.client.render import format_cypher, render_markdown
from tests.fixtures.llm_server import ScriptedLLMServer, free_port, tool_results
from tests.fixtures.scripts import graph_agent_script
from tests.fixtures.stack import Stack, running_stack
from tests.sse_client import read_stream

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
LOOKUP_Q = "show me the node for the intrinsic pathway for apoptosis"
AGENT_Q = "Why do cells die through the intrinsic pathway?"


def graph_script(delay: dict[str, float]) -> Any:
    return graph_agent_script(delay, "## Answer\n\nThe graph points to **{name}** (`{id}`).\n\n- one point\n- another")


@pytest.fixture(scope="module")
def stack(
    graph_settings: Settings, loaded_graph: Any, redis_url: str, llm_server_session: ScriptedLLMServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    llm_server_session.script = graph_script({})
    with running_stack(graph_settings, redis_url, llm_server_session.url, tmp_path_factory) as stack:
        yield stack


@pytest.fixture
def script(stack: Stack, llm_server_session: ScriptedLLMServer) -> ScriptedLLMServer:
    llm_server_session.script = graph_script({})
    return llm_server_session


def cli_env(stack: Stack) -> dict[str, str]:
    env = stack.env()
    env.pop("NO_COLOR", None)
    return env


def chat_agent(stack: Stack, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`chat-agent ARGV...` as a subprocess with the stack's environment."""
    return subprocess.run(
        [sys.executable, "-m", "services", *argv], env=cli_env(stack), cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


def test_lookup_question_is_answered_with_sources(stack: Stack, script: ScriptedLLMServer) -> None:
    done = chat_agent(stack, "ask", LOOKUP_Q, "--user", "cli-alice")
    assert done.returncode == 0, done.stderr
    out, err = done.stdout, done.stderr
    assert "\x1b[" not in out  # not a TTY: no ANSI
    assert "Intrinsic Pathway for Apoptosis" in out and "### " not in out  # headings rendered
    assert "Sources" in out
    links = re.findall(r"https://reactome\.org/content/detail/(R-HSA-\d+)", out)
    assert links and all(f"({st_id})" in out for st_id in links)
    assert re.search(rf"^session: {UUID}$", out, re.M)
    assert "route lookup (confidence 0.95, llm classifier)" in err
    assert re.search(r"lookup: \d+ matches in [\d.]+ ms", err)


def test_agent_question_shows_tool_calls_with_cypher_then_continues(stack: Stack, script: ScriptedLLMServer) -> None:
    done = chat_agent(stack, "ask", AGENT_Q, "--user", "cli-alice")
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "route agent (confidence 0.90" in err
    assert "agent iteration 1/" in err and "agent iteration 3/" in err
    assert f'vector_search(query="{AGENT_Q}", k=3)' in err
    # the Cypher, one clause per line, under the graph_query call
    lines = [line.strip() for line in err.splitlines()]
    at = lines.index("↳ graph_query:")
    assert lines[at + 1] == "MATCH (p)"
    assert re.fullmatch(r"WHERE p\.stId = 'R-HSA-\d+'", lines[at + 2])
    assert lines[at + 3] == "RETURN p.displayName AS name, p.stId AS id" and lines[at + 4] == "LIMIT 5"
    assert re.search(r"✓ vector_search [\d.]+ ms, \d+ chars: \[", err)
    assert re.search(r"✓ graph_query [\d.]+ ms", err)
    out = done.stdout
    answer = re.search(r"The graph points to (.+) \((R-HSA-\d+)\)\.", out)
    assert answer and "**" not in out, out
    assert "Answer\n======" in out and "  • one point" in out
    session_id = re.search(rf"^session: ({UUID})$", out, re.M).group(1)  # type: ignore[union-attr]
    # a streamed answer (answer_delta events) grows live on stderr
    job_id = re.search(rf"^job ({UUID})", err, re.M).group(1)  # type: ignore[union-attr]
    events = read_stream(f"{stack.gateway_url}/chat/job/{job_id}/events", headers={"X-Anon-Id": "cli-alice"})
    deltas = "".join(e.data["data"]["text"] for e in events if e.event == "answer_delta")
    if deltas:
        assert "answer: " + deltas in err

    # --session continues the conversation; --json prints the JobRecord only
    follow = chat_agent(stack, "ask", "--session", session_id, "--json", "--user", "cli-alice", LOOKUP_Q)
    assert follow.returncode == 0, follow.stderr
    record = json.loads(follow.stdout)
    assert record["session_id"] == session_id and record["status"] == "done"
    assert record["result"]["route_taken"] == "lookup" and record["result"]["sources"]
    assert follow.stderr == ""  # --json: nothing but the record

    shown = chat_agent(stack, "sessions", "show", session_id, "--user", "cli-alice", "--json")
    assert shown.returncode == 0, shown.stderr
    messages = json.loads(shown.stdout)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [m["route"] for m in messages[1::2]] == ["agent", "lookup"]


def test_bad_input_is_exit_2_with_field_and_reason(stack: Stack) -> None:
    empty = chat_agent(stack, "ask", "", "--user", "cli-alice")
    assert empty.returncode == 2
    assert "the gateway refused the request (422): message:" in empty.stderr
    unknown = chat_agent(stack, "ask", "hello", "--session", "00000000-0000-4000-8000-000000000000", "--user", "cli-alice")
    assert unknown.returncode == 2 and "(404): session not found" in unknown.stderr
    bad_user = chat_agent(stack, "sessions", "--user", "no spaces allowed")
    assert bad_user.returncode == 2 and "X-Anon-Id" in bad_user.stderr
    usage = chat_agent(stack, "sessions", "rename")
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_unreachable_gateway_is_exit_3_naming_the_url(stack: Stack) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = chat_agent(stack, "ask", "hello", "--url", url)
    assert done.returncode == 3
    assert f"cannot reach the gateway at {url}" in done.stderr
    listed = chat_agent(stack, "sessions", "--url", url)
    assert listed.returncode == 3 and url in listed.stderr


def test_sessions_list_rename_delete(stack: Stack, script: ScriptedLLMServer) -> None:
    asked = chat_agent(stack, "ask", LOOKUP_Q)  # no --user: the id kept under STATE_DIR
    assert asked.returncode == 0, asked.stderr
    session_id = re.search(rf"^session: ({UUID})$", asked.stdout, re.M).group(1)  # type: ignore[union-attr]
    stored = (Path(stack.settings.state_path) / "client-id").read_text().strip()
    listed = chat_agent(stack, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["session_id"] for s in json.loads(listed.stdout)] == [session_id]
    other = chat_agent(stack, "sessions", "--user", "cli-bob", "--json")
    assert other.returncode == 0 and json.loads(other.stdout) == []

    renamed = chat_agent(stack, "sessions", "rename", session_id, "apoptosis", "questions")
    assert renamed.returncode == 0 and "to 'apoptosis questions'" in renamed.stdout
    table = chat_agent(stack, "sessions")
    assert table.returncode == 0
    assert re.search(rf"^{session_id}\s+\d{{4}}-\d\d-\d\d \d\d:\d\d\s+2\s+apoptosis questions$", table.stdout, re.M), table.stdout
    shown = chat_agent(stack, "sessions", "show", session_id)
    assert shown.returncode == 0 and "apoptosis questions" in shown.stdout and "Intrinsic Pathway for Apoptosis" in shown.stdout
    assert chat_agent(stack, "sessions", "--user", "cli-bob", "show", session_id).returncode == 2  # not bob's

    deleted = chat_agent(stack, "sessions", "delete", session_id, "--user", stored)
    assert deleted.returncode == 0 and f"deleted {session_id}" in deleted.stdout
    assert json.loads(chat_agent(stack, "sessions", "--json").stdout) == []
    again = chat_agent(stack, "sessions", "delete", session_id)
    assert again.returncode == 2 and "session not found" in again.stderr


def test_rate_limited_is_exit_4_with_retry_after(stack: Stack, script: ScriptedLLMServer, tmp_path: Path) -> None:
    strict = Stack(msgspec.structs.replace(stack.settings, gateway_port=free_port(), rate_limit_per_minute=1), tmp_path)
    strict.start("gateway")
    try:
        strict.wait_ready(30)
        first = chat_agent(strict, "ask", LOOKUP_Q, "--user", "cli-carol", "--json")
        assert first.returncode == 0, first.stderr
        second = chat_agent(strict, "ask", LOOKUP_Q, "--user", "cli-carol")
        assert second.returncode == 4
        assert re.search(r"rate limited by the gateway \(429\): .*; retry after \d+ s", second.stderr)
    finally:
        strict.stop_all()


def test_dropped_stream_resumes_and_ctrl_c_cancels(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    slow = "Explain the intrinsic pathway, slowly"
    llm_server_session.script = graph_script({slow + "#2": 3.0})
    seen = len(llm_server_session.requests)
    client = subprocess.Popen(
        [sys.executable, "-m", "services", "ask", slow, "--user", "cli-dave"], env=cli_env(stack), cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not any(r.get("model") == "agent-model" and len(tool_results(r)) == 1 for r in llm_server_session.requests[seen:]):
        assert time.monotonic() < deadline and client.poll() is None, "the agent never reached its second call"
        time.sleep(0.05)
    (gateway,) = stack.of("gateway")
    assert gateway.terminate() == 0  # closes the open stream
    stack.start("gateway")
    stack.wait_ready(30)
    out, err = client.communicate(timeout=60)
    assert client.returncode == 0, err
    assert "reconnecting to the event stream" in err
    assert err.count("↳ graph_query:") == 1 and err.count("✓ vector_search") == 1  # no repeats
    assert "The graph points to" in out

    # Ctrl-C while waiting: ask the gateway to cancel, exit 130
    llm_server_session.script = graph_script({slow: 5.0})
    seen = len(llm_server_session.requests)
    client = subprocess.Popen(
        [sys.executable, "-m", "services", "ask", slow, "--user", "cli-dave"], env=cli_env(stack), cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not any(r.get("model") == "agent-model" for r in llm_server_session.requests[seen:]):
        assert time.monotonic() < deadline and client.poll() is None
        time.sleep(0.05)
    client.send_signal(signal.SIGINT)
    out, err = client.communicate(timeout=30)
    assert client.returncode == 130, err
    cancel = re.search(rf"interrupted; cancel of job ({UUID}): (requested|not supported by this gateway)", err)
    assert cancel, err
    if cancel.group(2) == "requested":  # the gateway has the cancel route: the job ends cancelled
        url = f"{stack.gateway_url}/chat/job/{cancel.group(1)}"
        deadline = time.monotonic() + 20
        while (status := httpx.get(url, headers={"X-Anon-Id": "cli-dave"}).json()["status"]) not in ("done", "error", "cancelled"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert status == "cancelled"


def test_terminal_markdown_and_cypher_layout() -> None:
    text = "# Title\n\nSome **bold**, `code` and [a link](https://reactome.org).\n\n- item\n  - nested\n1. first\n\n```\nx = 1\n```"
    plain = render_markdown(text, width=80)
    assert plain.splitlines()[:2] == ["Title", "====="]
    assert "Some bold, code and a link <https://reactome.org>." in plain
    assert "  • item" in plain and "    • nested" in plain and "  1. first" in plain and "    x = 1" in plain
    colored = render_markdown(text, width=80, color=True)
    assert "\x1b[1m\x1b[4mTitle\x1b[0m" in colored and "\x1b[1mbold\x1b[0m" in colored
    query = "MATCH (a)-[:HAS_EVENT]->(b) WHERE a.displayName = 'x RETURN y' RETURN b.stId ORDER BY b.stId LIMIT 3"
    assert format_cypher(query) == [
        "MATCH (a)-[:HAS_EVENT]->(b)", "WHERE a.displayName = 'x RETURN y'", "RETURN b.stId", "ORDER BY b.stId", "LIMIT 3",
    ]


def test_streamed_answer_is_not_shown_twice_on_one_terminal() -> None:
    """With stdout and stderr on the same terminal, the live view counts the answer's
    growth instead of writing it out before the rendered answer."""
    import io
    import os
    import pty
    import select

    from services.client.commands import Progress

    leader, follower = pty.openpty()
    try:
        with os.fdopen(os.dup(follower), "w") as out, os.fdopen(os.dup(follower), "w") as err:
            progress = Progress(err, quiet=False, out=out)
            progress.event("answer_delta", {"text": "secret words"})
            progress.event("answer_delta", {"text": " and more"})
            err.flush()
            shown = ""
            while "21 characters" not in shown and select.select([leader], [], [], 2)[0]:
                shown += os.read(leader, 4096).decode()
        assert "secret words" not in shown and "21 characters so far" in shown
    finally:
        os.close(leader)
        os.close(follower)
    piped = io.StringIO()
    Progress(piped, quiet=False, out=io.StringIO()).event("answer_delta", {"text": "secret words"})
    assert "secret words" in piped.getvalue()
