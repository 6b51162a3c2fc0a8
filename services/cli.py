"""The `chat-agent` command: one subcommand per service plus operator tools.

Each subcommand names the function that runs it as "module:function"; the module is
imported only when that subcommand runs, so `chat-agent router` never loads the
gateway. Every target has the signature `(settings, args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from shared.config import ConfigError, load_settings

TARGETS: dict[str, str] = {
    "gateway": "services.gateway.main:run",
    "router": "services.router.main:run",
    "lookup": "services.lookup.main:run",
    "agent": "services.agent.main:run",
    "up": "services.up:run",
    "replay": "services.gateway.replay:run",
    "graph load": "shared.graph.commands:load",
    "graph skeleton": "shared.graph.commands:skeleton",
    "graph serve": "shared.graph.commands:serve",
    "search": "shared.rag.commands:search",
    "cypher": "shared.graph.commands:cypher",
    "ask": "services.client.commands:ask",
    "sessions": "services.client.commands:sessions",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chat-agent", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, help_text in (
        ("gateway", "serve REST + SSE and project the event log"),
        ("router", "classify messages into lookup or agent"),
        ("lookup", "answer lookups by vector search"),
        ("agent", "answer with the tool-calling LLM loop"),
    ):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("--consumer", help="consumer name in the group (default: host-pid)")
        cmd.set_defaults(target=name)

    up = sub.add_parser("up", help="run the whole system on embedded defaults")
    up.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="SERVICE=N",
        help="processes per service, e.g. --scale agent=3 (repeatable)",
    )
    up.add_argument("--no-load", action="store_true", help="do not load the graph on first start")
    up.set_defaults(target="up")

    replay = sub.add_parser("replay", help="rebuild views from the event log, or print it for audit")
    scope = replay.add_mutually_exclusive_group()
    scope.add_argument("--job", metavar="ID")
    scope.add_argument("--session", metavar="ID")
    replay.add_argument("--since", metavar="TIME", help="ISO time, or a stream entry id")
    replay.add_argument("--print", dest="print_only", action="store_true", help="print events as JSON lines; change nothing")
    replay.set_defaults(target="replay")

    graph = sub.add_parser("graph", help="the Reactome graph in TuringDB")
    graph_sub = graph.add_subparsers(dest="graph_command", required=True, metavar="ACTION")
    load = graph_sub.add_parser("load", help="build the graph and its vector index (idempotent)")
    load.add_argument("--data-dir", help="Reactome data folder (default: the project's data/reactome)")
    load.add_argument("--force", action="store_true", help="rebuild even when the graph exists")
    load.set_defaults(target="graph load")
    skel = graph_sub.add_parser("skeleton", help="print the compact graph overview")
    skel.add_argument("--refresh", action="store_true", help="recompute instead of using the cache")
    skel.set_defaults(target="graph skeleton")
    serve = graph_sub.add_parser("serve", help="run an embedded TuringDB server in the foreground")
    serve.set_defaults(target="graph serve")

    search = sub.add_parser("search", help="vector search over the graph")
    search.add_argument("text")
    search.add_argument("--k", type=int, default=None)
    search.add_argument("--json", action="store_true", help="one JSON object per line")
    search.set_defaults(target="search")

    cypher = sub.add_parser("cypher", help="run a read-only Cypher query")
    cypher.add_argument("query")
    cypher.add_argument("--json", action="store_true", help="one JSON object per row")
    cypher.set_defaults(target="cypher")

    from services.client.options import add_client_parsers  # argparse only: nothing heavy

    add_client_parsers(sub)  # ask, sessions
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"chat-agent: {exc}", file=sys.stderr)
        return 2
    module_name, func_name = TARGETS[args.target].split(":")
    target = getattr(importlib.import_module(module_name), func_name)
    try:
        return int(target(settings, args) or 0)
    except ConfigError as exc:
        print(f"chat-agent: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
