"""The web chat page in a real browser: Debian's headless Chromium driven by
playwright-core (tests/browser/chat_page.mjs) against the whole stack as separate
processes, with the scripted LLM. The script asks questions through the page and
checks what it shows; this test checks the server side of what it did.

Needs `chromium` (apt) and `npm ci` in tests/browser (.ci/run does both). Without
them the test is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.config import PROJECT_ROOT, Settings
from tests.fixtures.llm_server import Reply, ScriptedLLMServer, Status, last_user_text, tool_results
from tests.fixtures.stack import Stack, stack_settings

BROWSER_DIR = PROJECT_ROOT / "tests" / "browser"
SCRIPT = BROWSER_DIR / "chat_page.mjs"
OUTPUT_DIR = PROJECT_ROOT / "test-output"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")

# the questions tests/browser/chat_page.mjs asks
SLOW_QUESTION = "Explain slowly how apoptosis is regulated"
FAILING_QUESTION = "Ask the model something it refuses"
RATE_LIMIT = 4  # the script's fifth message is refused

ANSWER = """## Intrinsic pathway

The graph points to **{name}**, whose id is `{st_id}`.

- first, the *emphasis* is Markdown
- see [Reactome](https://reactome.org/content/detail/{st_id})
- and [a trap](javascript:window.__pwned=3) stays text
- <a href="https://example.org">raw html</a> stays text too

<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>

```cypher
MATCH (p) RETURN p.displayName LIMIT 1
```
"""
SLOW_ANSWER = "Apoptosis is regulated by the balance of BCL-2 family proteins at the mitochondria. " * 6


def _streamed(**kwargs: Any) -> dict[str, Any]:
    """Stream options of Reply, where the scripted server has them."""
    known = {f.name for f in dataclasses.fields(Reply)}
    return {k: v for k, v in kwargs.items() if k in known}


def page_script(body: dict[str, Any]) -> Reply | Status:
    """Router: 'show me ...' is a lookup, the rest goes to the agent. Agent: search,
    query the top hit with Cypher, answer in Markdown laced with HTML that must stay
    text; the slow question streams its answer for long enough to be cancelled, and
    the failing one is refused by the model (a job_error)."""
    question = last_user_text(body)
    if body["model"] == "router-model":
        if question.lower().startswith("show me"):
            return Reply(json.dumps({"route": "lookup", "confidence": 0.95, "reasoning": "asks for a node"}))
        return Reply(json.dumps({"route": "agent", "confidence": 0.9, "reasoning": "needs an explanation"}))
    if question == FAILING_QUESTION:
        return Status(400, "scripted refusal")  # a job_error for the page to show
    if question == SLOW_QUESTION:
        return Reply(SLOW_ANSWER, **_streamed(chunk_chars=6, chunk_delay=0.08))
    results = tool_results(body)
    if not results:
        return Reply(tool_calls=[("vector_search", {"query": question, "k": 3})])
    if len(results) == 1:
        st_id = json.loads(results[0])[0]["stId"]
        cypher = f"MATCH (p) WHERE p.stId = '{st_id}' RETURN p.displayName AS name, p.stId AS id"
        return Reply(tool_calls=[("graph_query", {"cypher": cypher})])
    row = json.loads(results[1])["rows"][0]
    return Reply(ANSWER.format(name=row["name"], st_id=row["id"]), **_streamed(chunk_chars=24, chunk_delay=0.01))


def browser_missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    if shutil.which("node") is None:
        return "node is missing"
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        return "playwright-core is not installed (npm ci in tests/browser)"
    return None


@pytest.fixture(scope="module")
def browser() -> None:
    reason = browser_missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"the browser test must run under CI: {reason}")
    pytest.skip(f"browser test skipped: {reason}")


@pytest.fixture(scope="module")
def page_stack(
    graph_settings: Settings, loaded_graph: Any, redis_url: str, llm_server_session: ScriptedLLMServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    settings = stack_settings(
        graph_settings, redis_url, llm_server_session.url, tmp_path_factory.mktemp("state"),
        rate_limit_per_minute=RATE_LIMIT,
    )
    running = Stack(settings, Path(tmp_path_factory.mktemp("logs")))
    try:
        yield running.start_all()
    finally:
        running.stop_all()


def test_gateway_serves_the_page(page_stack: Stack) -> None:
    url = page_stack.gateway_url
    index = httpx.get(f"{url}/")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in index.headers["content-security-policy"]
    assert 'src="/static/app.js"' in index.text and "Reactome Knowledgebase" in index.text
    script = httpx.get(f"{url}/static/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert script.headers["x-content-type-options"] == "nosniff" and "content-security-policy" in script.headers
    # the page builds its DOM from elements and text nodes only
    assert not re.search(r"\.(inner|outer)HTML\s*\+?=|insertAdjacentHTML|document\.write|createContextualFragment", script.text)
    assert httpx.get(f"{url}/static/style.css").headers["content-type"].startswith("text/css")
    assert httpx.get(f"{url}/static/../app.py").status_code == 404
    assert "/" in httpx.get(f"{url}/openapi.json").json()["paths"]


def test_chat_page_in_chromium(browser: None, page_stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    llm_server_session.script = page_script
    OUTPUT_DIR.mkdir(exist_ok=True)
    env = {**os.environ, "GATEWAY_URL": page_stack.gateway_url, "OUTPUT_DIR": str(OUTPUT_DIR), "CHROMIUM_PATH": CHROMIUM}
    started = time.monotonic()
    run = subprocess.run(
        ["node", str(SCRIPT)], cwd=BROWSER_DIR, env=env, capture_output=True, text=True, timeout=150,
    )
    took = time.monotonic() - started
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    assert run.returncode == 0 and report.get("ok"), (
        f"browser check failed after {took:.1f}s: {report.get('error') or run.stdout[-2000:]}\n"
        f"stderr:\n{run.stderr[-3000:]}"
    )
    for shot in report["screenshots"]:
        assert Path(shot).stat().st_size > 10_000, shot

    # what the page did, seen from the server: the session it renamed and deleted is gone
    user = {"X-Anon-Id": report["anon"]}
    gone = httpx.get(f"{page_stack.gateway_url}/chat/session/{report['sessionId']}", headers=user)
    assert gone.status_code == 404
    assert httpx.get(f"{page_stack.gateway_url}/chat/sessions", headers=user).json() == []
    # the cancel closed the model's stream before it finished
    agent_calls = [r for r in llm_server_session.requests_for("agent-model") if last_user_text(r) == SLOW_QUESTION]
    assert len(agent_calls) == 1 and agent_calls[0].get("stream") is True
