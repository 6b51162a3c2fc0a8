"""`chat-agent up` as an operator runs it: embedded Valkey and TuringDB, one process per
service, a crashed service restarted, everything stopped on SIGTERM with no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from shared.config import PROJECT_ROOT
from tests.fixtures.llm_server import free_port


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid:
            found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    out: list[int] = []
    for child in children_of(pid):
        out += [child, *descendants(child)]
    return out


def cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def ready(url: str) -> bool:
    try:
        reply = httpx.get(f"{url}/readyz", timeout=2)
    except httpx.HTTPError:
        return False
    return reply.status_code == 200 and reply.json()["checks"]["group:agent"]["alive"] == 2


def test_up_runs_restarts_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "STATE_DIR": str(tmp_path / "state"),
        "GATEWAY_PORT": str(port),
        "TURINGDB_PORT": str(free_port()),
        "ROUTER_PROVIDER": "local",
        "OLLAMA_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",
        "LOG_LEVEL": "warning",
        "VALKEY_URL": "",
        "PYTHONPATH": str(PROJECT_ROOT),
    }
    log_path = tmp_path / "up.log"
    with log_path.open("wb") as log:
        up = subprocess.Popen(
            [sys.executable, "-m", "services", "up", "--no-load", "--scale", "agent=2"],
            env=env, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: ready(url), 90, "the system to be ready")
        out = log_path.read_text()
        assert f"gateway: {url}/" in out and "does NOT answer" in out and "valkey: redis://" in out
        family = descendants(up.pid)
        services = {pid: cmdline(pid) for pid in children_of(up.pid) if "-m services." in cmdline(pid)}
        assert sorted(c.split("-m services.")[1].split()[0] for c in services.values()) == ["agent", "agent", "gateway", "lookup", "router"]
        assert any("valkey-server" in cmdline(pid) for pid in family)
        assert any("turingdb" in cmdline(pid) for pid in family)

        router = next(pid for pid, c in services.items() if "services.router" in c)
        os.kill(router, signal.SIGKILL)
        wait_for(lambda: "router-1 exited with -9; restarting" in log_path.read_text(), 30, "the restart notice")
        wait_for(lambda: any("services.router" in cmdline(p) and p != router for p in children_of(up.pid)), 30, "a new router")
        wait_for(lambda: ready(url), 60, "ready again")
        family = descendants(up.pid)

        up.send_signal(signal.SIGTERM)
        assert up.wait(60) == 0
        assert "stopped" in log_path.read_text()
        wait_for(lambda: not any(alive(pid) for pid in family), 20, "no process left behind")
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
