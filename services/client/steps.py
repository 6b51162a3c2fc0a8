"""One job event as the lines a person watching `chat-agent ask` reads on stderr."""

from __future__ import annotations

import json
from typing import Any

from services.client.render import BOLD, CYAN, DIM, GREEN, RED, YELLOW, Style, format_cypher

PREVIEW_CHARS = 110
ARG_CHARS = 80


def one_line(text: Any, limit: int = PREVIEW_CHARS) -> str:
    """`text` on one line, cut to `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_arguments(arguments: Any) -> str:
    """Tool arguments as `name=value, ...` (values as JSON, long ones cut)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return one_line(arguments, ARG_CHARS)
    if not isinstance(arguments, dict):
        return one_line(json.dumps(arguments, ensure_ascii=False), ARG_CHARS)
    return ", ".join(f"{k}={one_line(json.dumps(v, ensure_ascii=False), ARG_CHARS)}" for k, v in arguments.items())


def _number(value: Any, spec: str = ".2f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "?"


def describe(kind: str, data: dict[str, Any], style: Style) -> list[str]:
    """The lines for one event; [] for events shown elsewhere (answer_delta, job_done)."""
    mark = style("•", DIM)
    if kind == "job_submitted":
        return [f"{mark} submitted" + (" (new session)" if data.get("is_new_session") else "")]
    if kind == "routing_started":
        attempt = data.get("attempt")
        return [f"{mark} routing…" + (f" (attempt {attempt})" if isinstance(attempt, int) and attempt > 1 else "")]
    if kind == "routing_fallback":
        return [f"{style('!', YELLOW)} router LLM failed, fallback to the {data.get('classifier', 'local')} classifier: {one_line(data.get('reason', ''))}"]
    if kind == "routing_done":
        route = str(data.get("route", "?"))
        line = f"{style('→', GREEN)} route {style(route, BOLD)} (confidence {_number(data.get('confidence'))}"
        if data.get("classifier"):
            line += f", {data['classifier']} classifier"
        line += ")"
        if data.get("escalated"):
            line += f" escalated from {data.get('proposed_route', 'lookup')}: confidence below {_number(data.get('threshold'))}"
        lines = [line]
        if data.get("reasoning"):
            lines.append(style(f"  {one_line(data['reasoning'])}", DIM))
        return lines
    if kind == "lookup_started":
        return [f"{mark} lookup: vector search, top {data.get('k', '?')}"]
    if kind == "lookup_results":
        top = data.get("top") or []
        names = ", ".join(f"{t.get('displayName')} ({t.get('stId')})" for t in top[:3] if isinstance(t, dict))
        return [f"{mark} lookup: {data.get('count', len(top))} matches in {_number(data.get('duration_ms'), '.1f')} ms"
                + (f": {one_line(names)}" if names else "")]
    if kind == "agent_step":
        return [f"{mark} agent iteration {data.get('iteration', '?')}/{data.get('max_iterations', '?')}"]
    if kind == "tool_call":
        name = str(data.get("name", "?"))
        arguments = data.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        if name == "graph_query" and isinstance(arguments, dict) and isinstance(arguments.get("cypher"), str):
            rest = {k: v for k, v in arguments.items() if k != "cypher"}
            head = f"  {style('↳', CYAN)} {style(name, BOLD)}" + (f"({format_arguments(rest)})" if rest else "") + ":"
            return [head, *(style(f"      {line}", CYAN) for line in format_cypher(arguments["cypher"]))]
        return [f"  {style('↳', CYAN)} {style(name, BOLD)}({format_arguments(arguments)})"]
    if kind == "tool_result":
        ok = data.get("ok", True)
        sign = style("✓", GREEN) if ok else style("✗", RED)
        size = f", {data['chars']} chars" if isinstance(data.get("chars"), int) else ""
        head = f"  {sign} {data.get('name', '?')} {_number(data.get('duration_ms'), '.1f')} ms{size}"
        preview = data.get("preview")
        return [head + (f": {style(one_line(preview), DIM)}" if preview else "")]
    if kind == "agent_restarted":
        return [f"{style('!', YELLOW)} agent restarted the job (delivery {data.get('attempt', '?')})"]
    if kind == "agent_degraded":
        return [f"{style('!', YELLOW)} LLM unreachable at {data.get('endpoint', '?')}: answering with graph matches ({one_line(data.get('reason', ''))})"]
    if kind == "agent_done":
        capped = " (hit the iteration cap)" if data.get("capped") else ""
        return [f"{mark} agent done: {data.get('iterations', '?')} iterations, {data.get('tool_calls', '?')} tool calls{capped}"]
    if kind == "cancel_requested":
        return [f"{style('!', YELLOW)} cancel requested: {one_line(data.get('reason', ''))}"]
    if kind == "job_cancelled":
        return [f"{style('✗', RED)} cancelled ({one_line(data.get('reason', ''))})"]
    if kind == "job_error":
        return [f"{style('✗', RED)} error: {one_line(data.get('error', ''), 300)}"]
    if kind in ("answer_delta", "job_done"):
        return []
    shown = one_line(json.dumps(data, ensure_ascii=False, default=str)) if data else ""
    return [f"{mark} {kind}" + (f" {style(shown, DIM)}" if shown else "")]
