"""The `ask` and `sessions` subcommands' arguments (argparse only, imported by services.cli)."""

from __future__ import annotations

import argparse
from typing import Any

from services.client.exits import EXIT_CODES_HELP


def _client_options(parser: argparse.ArgumentParser, **default: Any) -> None:
    """--url, --user, --json; with default=SUPPRESS on a sub-action so it keeps the parent's values."""
    parser.add_argument("--url", help="gateway URL (default http://GATEWAY_HOST:GATEWAY_PORT)", **default)
    parser.add_argument("--user", metavar="ID", help="your user id, sent as X-Anon-Id (default: one kept under STATE_DIR)", **default)
    parser.add_argument("--json", action="store_true", help="print JSON only", **default)


def add_client_parsers(sub: Any) -> None:
    """Add `ask` and `sessions [list|show|rename|delete]` to the chat-agent subparsers."""
    raw = argparse.RawDescriptionHelpFormatter
    ask = sub.add_parser(
        "ask",
        help="ask a question, follow its steps live, print the answer",
        description="Post a question to the gateway, show each step as it happens (stderr), then print "
        "the answer with its sources and the session id (stdout).",
        epilog=EXIT_CODES_HELP,
        formatter_class=raw,
    )
    ask.add_argument("question", nargs="+", help="the question (several words are joined; '-' reads stdin)")
    ask.add_argument("--session", metavar="ID", help="continue this session")
    _client_options(ask)
    ask.set_defaults(target="ask")

    sessions = sub.add_parser(
        "sessions",
        help="list, show, rename or delete your sessions",
        description="Your sessions on the gateway (the ones created with your user id).",
        epilog=EXIT_CODES_HELP,
        formatter_class=raw,
    )
    _client_options(sessions)
    sessions.set_defaults(target="sessions", sessions_action="list")
    actions = sessions.add_subparsers(dest="sessions_action", metavar="ACTION")
    quiet = {"default": argparse.SUPPRESS}
    listed = actions.add_parser("list", help="your sessions, newest activity first (the default)")
    _client_options(listed, **quiet)
    show = actions.add_parser("show", help="one session with its messages")
    show.add_argument("session_id", metavar="ID")
    _client_options(show, **quiet)
    rename = actions.add_parser("rename", help="give a session a name")
    rename.add_argument("session_id", metavar="ID")
    rename.add_argument("name", nargs="+", metavar="NAME")
    _client_options(rename, **quiet)
    delete = actions.add_parser("delete", help="delete a session")
    delete.add_argument("session_id", metavar="ID")
    _client_options(delete, **quiet)
