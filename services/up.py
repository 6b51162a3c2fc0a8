"""`chat-agent up`: the whole system on embedded defaults, one supervised process per service.

Starts (or reuses) the embedded Valkey and TuringDB, loads the Reactome graph on first
run, then runs gateway, router, lookup and agent as separate child processes
(`--scale agent=3`), restarts a child that dies, and stops everything on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import httpx

from shared.config import ConfigError, Settings
from shared.graph.client import base_url
from shared.graph.server import ensure_server
from shared.llm import resolve_endpoint
from shared.logging import configure_logging, get_logger
from shared.valkey_server import ensure_valkey

log = get_logger("up")

SERVICES = ("gateway", "router", "lookup", "agent")
STOP_GRACE_SECONDS = 15.0
RESTART_BACKOFF_SECONDS = (0.5, 1, 2, 5, 10)


@dataclass
class Child:
    service: str
    index: int
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        return f"{self.service}-{self.index}"

    def start(self) -> None:
        argv = [sys.executable, "-m", f"services.{self.service}"]
        if self.service != "gateway":
            argv += ["--consumer", f"{self.name}-{os.getpid()}"]
        self.process = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL)
        self.started_at = time.monotonic()


def parse_scale(values: list[str]) -> dict[str, int]:
    counts = {service: 1 for service in SERVICES}
    for value in values:
        service, _, number = value.partition("=")
        if service not in SERVICES or not number.isdigit() or not 1 <= int(number) <= 32:
            raise ConfigError(f"--scale {value!r} is not valid: expected SERVICE=N with SERVICE one of {', '.join(SERVICES)} and N from 1 to 32")
        counts[service] = int(number)
    return counts


def describe_llm(settings: Settings) -> str:
    """Which endpoint the agent will use and whether it answers now."""
    try:
        endpoint = resolve_endpoint(settings, "agent")
    except ConfigError as exc:
        return f"LLM: not usable ({exc})"
    try:
        reply = httpx.get(f"{endpoint.base_url}/models", headers={"Authorization": f"Bearer {endpoint.api_key}"}, timeout=2.0)
        state = f"answers (HTTP {reply.status_code})"
    except httpx.HTTPError as exc:
        state = f"does NOT answer ({type(exc).__name__}); jobs get the local router and graph-match answers"
    return f"LLM: {endpoint.describe()} {state}"


def run(settings: Settings, args: argparse.Namespace) -> int:
    configure_logging(settings, "up")
    counts = parse_scale(args.scale)
    settings.state_path.mkdir(parents=True, exist_ok=True)
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    valkey_url, valkey = ensure_valkey(settings)
    print(f"valkey: {valkey_url} ({'embedded' if valkey else 'external'})", flush=True)
    turing = ensure_server(settings)
    graph_url = base_url(settings.turingdb_url, settings.turingdb_port)
    print(f"turingdb: {graph_url} ({'embedded' if turing else 'external'})", flush=True)
    children: list[Child] = []
    try:
        if not args.no_load:
            from shared.graph.loader import load_graph

            load_graph(settings, progress=lambda line: print(f"graph: {line}", flush=True))
        env = {**os.environ, "VALKEY_URL": valkey_url, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        for service in SERVICES:
            for index in range(counts[service]):
                child = Child(service, index + 1, env)
                child.start()
                children.append(child)
        print(describe_llm(settings), flush=True)
        print(f"gateway: http://{settings.gateway_host}:{settings.gateway_port}/  (Ctrl-C stops everything)", flush=True)
        while not stopping:
            time.sleep(0.2)
            for child in children:
                if stopping or child.process is None or child.process.poll() is None:
                    continue
                code = child.process.returncode
                delay = RESTART_BACKOFF_SECONDS[min(child.restarts, len(RESTART_BACKOFF_SECONDS) - 1)]
                if time.monotonic() - child.started_at > 60:
                    child.restarts = 0
                print(f"{child.name} exited with {code}; restarting in {delay:g} s", flush=True)
                time.sleep(delay)
                child.restarts += 1
                child.start()
    finally:
        stop_children(children)
        if turing is not None:
            turing.stop()
        if valkey is not None:
            valkey.stop()
        print("stopped", flush=True)
    return 0


def stop_children(children: list[Child]) -> None:
    """SIGTERM every child, wait for them to finish in-flight work, SIGKILL stragglers."""
    running = [c for c in children if c.process is not None and c.process.poll() is None]
    for child in running:
        child.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for child in running:
        try:
            child.process.wait(max(0.1, deadline - time.monotonic()))  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            child.process.kill()  # type: ignore[union-attr]
            child.process.wait()  # type: ignore[union-attr]
