"""Support for the bad-input tests (tests/test_fuzz_*.py), no tests here.

- `gateway_process`: `python -m services.gateway` as its own process on a free port,
  against the session's real Valkey under the test's key prefix
- `StoreState` / `store_state`: what a refused request must leave untouched (stream
  lengths and the key names under the prefix)
- the reliability tally: every test records what it tried and what held; the rows
  are merged into test-output/reliability.json, rendered to test-output/reliability.txt
  and printed once, after the last fuzz test of the run (`pytest -s` shows it)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from shared.bus.keys import Keys
from shared.config import PROJECT_ROOT
from shared.valkey_server import free_port

REPORT_DIR = PROJECT_ROOT / "test-output"
ROWS_FILE = REPORT_DIR / "reliability.json"
TABLE_FILE = REPORT_DIR / "reliability.txt"
STREAMS = ("events", "router", "lookup", "agent")


# --- a gateway process ---------------------------------------------------------


@dataclass
class GatewayProcess:
    """A running gateway: its base url, process and log file."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def server_errors(self) -> list[str]:
        """Log lines of answers the gateway gave as 500 (unhandled or Valkey errors)."""
        return [line for line in self.log().splitlines() if "unhandled_error" in line or "valkey_error" in line]


@contextmanager
def gateway_process(redis_url: str, keys: Keys, log_path: Path, **env: str) -> Iterator[GatewayProcess]:
    """`python -m services.gateway` on a free port; stopped with SIGTERM afterwards."""
    port = free_port()
    environ = {
        **os.environ,
        "VALKEY_URL": redis_url,
        "KEY_PREFIX": keys.prefix,
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(port),
        "LOG_FORMAT": "console",
        "RATE_LIMIT_PER_MINUTE": "100000",
        "TURINGDB_PORT": "9",  # nothing listens: /readyz answers 503 naming TuringDB
        **env,
    }
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.gateway"], env=environ, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=PROJECT_ROOT,
        )
    gw = GatewayProcess(f"http://127.0.0.1:{port}", port, proc, log_path)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, f"the gateway exited: {gw.log()}"
            try:
                if httpx.get(f"{gw.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the gateway did not start: {gw.log()}"
            time.sleep(0.05)
        yield gw
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# --- what a refused request must not change --------------------------------------


@dataclass(frozen=True)
class StoreState:
    """Stream lengths and the set of keys under a prefix (rate-limit windows left out)."""

    streams: tuple[tuple[str, int], ...]
    keys: frozenset[str]

    def describe_change(self, later: StoreState) -> str:
        added = sorted(later.keys - self.keys)[:5]
        removed = sorted(self.keys - later.keys)[:5]
        return f"streams {dict(self.streams)} -> {dict(later.streams)}; keys added {added}, removed {removed}"


def store_state(client: redis.Redis, keys: Keys) -> StoreState:
    """What is in Valkey under `keys`: stream lengths and key names (not rate-limit windows)."""
    names = {"events": keys.events, **{s: keys.inbox(s) for s in STREAMS[1:]}}
    streams = tuple((label, int(client.xlen(key))) for label, key in names.items())
    found = {k.decode() if isinstance(k, bytes) else str(k) for k in client.scan_iter(match=f"{keys.prefix}*", count=1000)}
    return StoreState(streams, frozenset(k for k in found if not k.startswith(f"{keys.prefix}ratelimit:")))


# --- the tally -------------------------------------------------------------------


@dataclass
class Row:
    """One line of the reliability table."""

    area: str
    what: str
    tried: int
    held: int
    seconds: float
    note: str = ""


def _load_rows() -> list[Row]:
    try:
        return [Row(**r) for r in json.loads(ROWS_FILE.read_text())]
    except (OSError, ValueError, TypeError):
        return []


def record(area: str, what: str, tried: int, held: int, seconds: float, note: str = "") -> Row:
    """Merge one row (by area and what) into test-output/reliability.json and .txt."""
    row = Row(area, what, tried, held, round(seconds, 1), note)
    rows = _load_rows()
    at = next((i for i, r in enumerate(rows) if (r.area, r.what) == (area, what)), None)
    if at is None:
        rows.append(row)
    else:
        rows[at] = row
    order = {name: i for i, name in enumerate(AREAS)}
    rows.sort(key=lambda r: order.get(r.area, len(order)))
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    ROWS_FILE.write_text(json.dumps([asdict(r) for r in rows], indent=1, ensure_ascii=False))
    TABLE_FILE.write_text(render(rows) + "\n")
    return row


AREAS = ("schemathesis", "contracts", "cypher gate", "hostile HTTP")


def render(rows: list[Row]) -> str:
    """The rows as a plain-text table with a total line."""
    header = ("area", "what was tried", "tried", "held", "s", "note")
    body = [(r.area, r.what, str(r.tried), str(r.held), f"{r.seconds:.1f}", r.note) for r in rows]
    total = ("total", "", str(sum(r.tried for r in rows)), str(sum(r.held for r in rows)), f"{sum(r.seconds for r in rows):.1f}", "")
    widths = [max(len(line[i]) for line in [header, *body, total]) for i in range(len(header))]

    def fmt(line: tuple[str, ...]) -> str:
        cells = [c.rjust(w) if i in (2, 3, 4) else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths))]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(b) for b in body), rule, fmt(total)])


def markdown(rows: list[Row]) -> str:
    """The rows as a Markdown table (for docs/reliability.md)."""
    lines = ["| area | what was tried | tried | held | s | note |", "|---|---|---:|---:|---:|---|"]
    lines += [f"| {r.area} | {r.what} | {r.tried} | {r.held} | {r.seconds:.1f} | {r.note} |" for r in rows]
    lines.append(f"| **total** | | **{sum(r.tried for r in rows)}** | **{sum(r.held for r in rows)}** | {sum(r.seconds for r in rows):.1f} | |")
    return "\n".join(lines)


@pytest.fixture(autouse=True)
def reliability_table(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the last fuzz test of the run, print the table (import this into each module)."""
    yield
    fuzz = [item for item in request.session.items if Path(str(item.fspath)).name.startswith("test_fuzz_")]
    if fuzz and request.node is fuzz[-1]:
        rows = _load_rows()
        if rows:
            print(f"\n\nReliability (bad input), also in {TABLE_FILE.relative_to(PROJECT_ROOT)}:\n{render(rows)}\n")


def assert_all_held(tried: int, held: int, failures: list[Any], what: str) -> None:
    """Fail with the first few failures when anything did not hold."""
    assert held == tried and not failures, f"{what}: {tried - held} of {tried} did not hold: {failures[:5]}"
