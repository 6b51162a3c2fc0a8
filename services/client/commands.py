"""CLI targets `chat-agent ask` and `chat-agent sessions` (signature (settings, args) -> int).

Exit codes: 0 answered / done; 1 the job ended in error (or the gateway failed);
2 bad input (a 4xx from the gateway, with its field and reason); 3 the gateway is
unreachable; 4 rate limited (with Retry-After); 130 interrupted (the job is cancelled).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from shared.config import Settings
from services.client.api import ClientError, GatewayClient
from services.client.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_JOB_ERROR, EXIT_OK
from services.client.render import BOLD, DIM, UNDERLINE, Style, render_markdown, use_color
from services.client.sse import FINAL_STATUSES, JobEvents
from services.client.steps import describe

CLIENT_ID_FILE = "client-id"
REACTOME_DETAIL = "https://reactome.org/content/detail/"
_ST_ID = re.compile(r"R-[A-Z]{2,4}-\d+(?:\.\d+)?")
_ANON = re.compile(r"[^A-Za-z0-9_.-]")

def default_url(settings: Settings) -> str:
    """http://GATEWAY_HOST:GATEWAY_PORT, with a wildcard bind address made local."""
    host = settings.gateway_host
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "[::1]"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.gateway_port}"


def default_user(settings: Settings) -> str:
    """A stable user id kept under the state folder, else one derived from $USER."""
    path = Path(settings.state_path) / CLIENT_ID_FILE
    try:
        value = path.read_text().strip()
        if value and not _ANON.search(value) and len(value) <= 128:
            return value
    except OSError:
        pass
    value = f"cli-{uuid.uuid4().hex[:16]}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
        return value
    except OSError:
        import getpass

        try:
            name = getpass.getuser()
        except Exception:  # noqa: BLE001 - no user name at all
            name = "anon"
        return "cli-" + (_ANON.sub("_", name)[:100] or "anon")


def make_client(settings: Settings, args: argparse.Namespace) -> GatewayClient:
    return GatewayClient(args.url or default_url(settings), args.user or default_user(settings))


def fail(exc: ClientError) -> int:
    print(f"chat-agent: {exc}", file=sys.stderr)
    return exc.exit_code


def source_lines(sources: list[dict[str, Any]], style: Style) -> list[str]:
    """Numbered sources: display name, stable id and its Reactome page."""
    lines: list[str] = []
    seen: set[str] = set()
    for source in sources:
        ident = str(source.get("stId") or source.get("id") or "")
        if ident in seen:
            continue
        seen.add(ident)
        name = str(source.get("displayName") or source.get("name") or ident or "?")
        line = f"  {len(lines) + 1}. {name}" + (f" ({ident})" if ident and ident != name else "")
        if _ST_ID.fullmatch(ident):
            line += f"  {style(REACTOME_DETAIL + ident, UNDERLINE)}"
        lines.append(line)
    return lines


def print_answer(record: dict[str, Any], out: IO[str]) -> None:
    """The answer rendered for a terminal, its sources, route, tokens and session id."""
    color = use_color(out)
    style = Style(color)
    result = record.get("result") or {}
    print(render_markdown(str(result.get("answer", "")), color=color), file=out)
    sources = source_lines(list(result.get("sources") or []), style)
    if sources:
        print("", file=out)
        print(style("Sources", BOLD), file=out)
        print("\n".join(sources), file=out)
    usage = result.get("token_usage") or {}
    print("", file=out)
    print(
        style(
            f"route {result.get('route_taken', '?')} · tokens {usage.get('input_tokens', 0)} in / "
            f"{usage.get('output_tokens', 0)} out · job {record.get('job_id')}",
            DIM,
        ),
        file=out,
    )
    print(f"session: {record.get('session_id')}", file=out)


class Progress:
    """The live view on stderr: one line per step, the answer as it grows."""

    def __init__(self, err: IO[str], quiet: bool, out: IO[str] | None = None) -> None:
        self.err = err
        self.quiet = quiet
        self.style = Style(use_color(err))
        self.streaming = False
        # When the answer will be printed on the same terminal, show only its growth.
        self.count_only = out is not None and same_terminal(out, err)
        self.streamed_chars = 0

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if self.quiet:
            return
        if kind == "answer_delta":
            text = str(data.get("text", ""))
            if self.count_only:
                self.streamed_chars += len(text)
                self.err.write("\r" + self.style(f"answer: {self.streamed_chars:,} characters so far", BOLD))
                self.streaming = True
            else:
                if not self.streaming:
                    self.err.write(self.style("answer: ", BOLD))
                    self.streaming = True
                self.err.write(text)
            self.err.flush()
            return
        self.end_stream()
        for line in describe(kind, data, self.style):
            print(line, file=self.err, flush=True)

    def end_stream(self) -> None:
        if self.streaming:
            self.err.write("\n")
            self.err.flush()
            self.streaming = False

    def note(self, text: str) -> None:
        if not self.quiet:
            self.end_stream()
            print(self.style(text, DIM), file=self.err, flush=True)


def same_terminal(a: IO[str], b: IO[str]) -> bool:
    """True when both streams are the same terminal device."""
    try:
        return a.isatty() and b.isatty() and os.path.samestat(os.fstat(a.fileno()), os.fstat(b.fileno()))
    except (OSError, ValueError, AttributeError):
        return False


def wait_final(client: GatewayClient, job_id: str, timeout: float = 15.0) -> dict[str, Any]:
    """The job record once it shows a final status (views may trail the log briefly)."""
    deadline = time.monotonic() + timeout
    record = client.job(job_id)
    while record.get("status") not in FINAL_STATUSES and time.monotonic() < deadline:
        time.sleep(0.05)
        record = client.job(job_id)
    return record


def read_question(parts: list[str]) -> str:
    if parts == ["-"]:
        return sys.stdin.read()
    return " ".join(parts)


def ask(settings: Settings, args: argparse.Namespace) -> int:
    """Post a question, show its steps live, print the answer and its sources."""
    message = read_question(list(args.question))
    progress = Progress(sys.stderr, quiet=bool(args.json), out=sys.stdout)
    with make_client(settings, args) as client:
        try:
            job = client.post_message(message, args.session)
        except ClientError as exc:
            return fail(exc)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        job_id = str(job["job_id"])
        progress.note(f"job {job_id} · session {job['session_id']}")
        try:
            events = JobEvents(
                client,
                job_id,
                on_reconnect=lambda reason, n: progress.note(f"reconnecting to the event stream ({reason}, try {n})"),
            )
            for event in events:
                progress.event(event.type, event.data)
            progress.end_stream()
            record = wait_final(client, job_id)
        except ClientError as exc:
            progress.end_stream()
            return fail(exc)
        except KeyboardInterrupt:
            progress.end_stream()
            outcome = client.cancel(job_id)
            print(f"chat-agent: interrupted; cancel of job {job_id}: {outcome}", file=sys.stderr)
            return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(record, ensure_ascii=False, indent=2))
    status = record.get("status")
    if status == "done" and record.get("result") is not None:
        if not args.json:
            print_answer(record, sys.stdout)
            progress.note(f"continue with: chat-agent ask --session {record.get('session_id')} \"…\"")
        return EXIT_OK
    if status == "cancelled":
        print(f"chat-agent: the job was cancelled: {record.get('error') or 'no reason given'}", file=sys.stderr)
    elif status in FINAL_STATUSES:
        print(f"chat-agent: the job ended in error: {record.get('error') or 'no reason given'}", file=sys.stderr)
    else:
        print(f"chat-agent: the job has not ended (status {status}); see GET /chat/job/{job_id}", file=sys.stderr)
    print(f"session: {record.get('session_id')}", file=sys.stderr)
    return EXIT_JOB_ERROR


def _when(value: Any) -> str:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return str(value)


def print_sessions(rows: list[dict[str, Any]], out: IO[str]) -> None:
    style = Style(use_color(out))
    if not rows:
        print("no sessions", file=out)
        return
    print(style(f"{'SESSION':36}  {'LAST ACTIVITY':16}  {'MSGS':>4}  NAME", BOLD), file=out)
    for row in rows:
        print(
            f"{row.get('session_id', ''):36}  {_when(row.get('last_activity')):16}  "
            f"{row.get('message_count', 0):>4}  {row.get('name') or ''}",
            file=out,
        )


def print_session(session: dict[str, Any], out: IO[str]) -> None:
    color = use_color(out)
    style = Style(color)
    title = session.get("name") or "(unnamed)"
    print(style(f"{title} · session {session.get('session_id')} · created {_when(session.get('created_at'))}", BOLD), file=out)
    for message in session.get("messages") or []:
        role = message.get("role")
        print("", file=out)
        if role == "assistant":
            conf = message.get("confidence")
            extra = f" ({message.get('route')}" + (f", confidence {conf:.2f}" if isinstance(conf, (int, float)) else "") + ")"
            print(style("assistant" + (extra if message.get("route") else ""), BOLD), file=out)
            print(render_markdown(str(message.get("content", "")), color=color), file=out)
        else:
            print(style(str(role), BOLD), file=out)
            print(str(message.get("content", "")), file=out)
    if session.get("pending_job_id"):
        print("", file=out)
        print(style(f"(job {session['pending_job_id']} is still running)", DIM), file=out)


def sessions(settings: Settings, args: argparse.Namespace) -> int:
    """List, show, rename or delete this user's sessions."""
    action = getattr(args, "sessions_action", None) or "list"
    with make_client(settings, args) as client:
        try:
            if action == "list":
                rows = client.sessions()
                if args.json:
                    print(json.dumps(rows, ensure_ascii=False, indent=2))
                else:
                    print_sessions(rows, sys.stdout)
            elif action == "show":
                session = client.session(args.session_id)
                if args.json:
                    print(json.dumps(session, ensure_ascii=False, indent=2))
                else:
                    print_session(session, sys.stdout)
            elif action == "rename":
                session = client.rename(args.session_id, " ".join(args.name))
                if args.json:
                    print(json.dumps(session, ensure_ascii=False, indent=2))
                else:
                    print(f"renamed {session.get('session_id')} to {session.get('name')!r}")
            elif action == "delete":
                client.delete(args.session_id)
                if args.json:
                    print(json.dumps({"session_id": args.session_id, "deleted": True}))
                else:
                    print(f"deleted {args.session_id}")
            else:
                print(f"chat-agent: unknown sessions action {action!r}", file=sys.stderr)
                return EXIT_BAD_INPUT
        except ClientError as exc:
            return fail(exc)
    return EXIT_OK
