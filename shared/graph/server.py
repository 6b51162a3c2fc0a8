"""A supervised TuringDB server: the binary shipped in the `turingdb` wheel.

Started without `-demon` the server runs a console that exits when its stdin closes,
so the child keeps a pipe open on stdin. Graphs are written to disk when they are
built (LOAD JSONL, commits), so stopping is SIGTERM and a short wait.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import httpx

from shared.config import Settings
from shared.graph.client import GraphClient, base_url
from shared.graph.errors import GraphUnavailable
from shared.logging import get_logger

log = get_logger(__name__)


def turingdb_binary() -> str:
    """Path of the `turingdb` executable inside the installed wheel."""
    import turingdb

    return turingdb.get_executable_path("turingdb")


def turing_dir(settings: Settings) -> Path:
    """Where an embedded server keeps its graphs, vectors and import files."""
    return settings.state_path / "turingdb"


def answers(url: str, timeout: float = 1.0) -> bool:
    """True when a TuringDB server answers a query at `url` (sync, for start-up)."""
    try:
        response = httpx.post(f"{url}/query", params={"graph": "default"}, json={"query": "LIST GRAPH"}, timeout=timeout)
    except httpx.HTTPError:
        return False
    return response.status_code < 500 and "header" in response.text


class TuringDBServer:
    """One `turingdb start` child process on `directory`, `host`:`port`."""

    def __init__(self, directory: Path, port: int, host: str = "127.0.0.1", load: list[str] | None = None) -> None:
        self.directory = Path(directory)
        self.port = port
        self.host = host
        self.load = list(load or [])
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    @property
    def data_dir(self) -> Path:
        """Files that LOAD JSONL / LOAD VECTOR read must be under this folder."""
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def start(self, timeout: float = 30.0) -> TuringDBServer:
        """Start the child and wait until it answers queries."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        if answers(self.url, 0.5):
            raise GraphUnavailable(None, f"port {self.port} already has a TuringDB server; refusing to start another")
        command = [turingdb_binary(), "start", "-turing-dir", str(self.directory), "-p", str(self.port), "-i", self.host]
        for graph in self.load:
            command += ["-load", graph]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "HOME": str(self.directory)}
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._close_log()
                raise GraphUnavailable(None, f"turingdb exited with status {self.process.returncode}; see {self.log_path}")
            if answers(self.url, 0.5):
                log.info("turingdb_started", url=self.url, dir=str(self.directory), pid=self.process.pid)
                return self
            time.sleep(0.05)
        self.stop()
        raise GraphUnavailable(None, f"turingdb did not answer within {timeout:g} s; see {self.log_path}")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then wait for the process to finish (kill after `timeout`)."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("turingdb_kill", pid=process.pid, after_seconds=timeout)
                process.kill()
                process.wait()
        if process.stdin is not None:
            process.stdin.close()
        self._close_log()
        log.info("turingdb_stopped", url=self.url, status=process.returncode)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def wait(self) -> int:
        """Block until the child exits (for `chat-agent graph serve`)."""
        assert self.process is not None
        return self.process.wait()

    def __enter__(self) -> TuringDBServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def ensure_server(settings: Settings) -> TuringDBServer | None:
    """Use the server at TURINGDB_URL:TURINGDB_PORT if one answers (None), else start one.

    A started server keeps its files in `state_path/turingdb` and has the graph
    TURINGDB_GRAPH loaded when it is on disk. The caller stops what it started.
    """
    url = base_url(settings.turingdb_url, settings.turingdb_port)
    if answers(url):
        return None
    host = settings.turingdb_url.split("://")[-1].split(":")[0].rstrip("/")
    if host not in ("localhost", "127.0.0.1", "::1"):
        raise GraphUnavailable(None, f"no TuringDB server answers at {url}, and only a local one can be started")
    directory = turing_dir(settings)
    on_disk = (directory / "graphs" / settings.turingdb_graph).exists()
    server = TuringDBServer(directory, settings.turingdb_port, "127.0.0.1", load=[settings.turingdb_graph] if on_disk else [])
    return server.start()


async def wait_until_answers(client: GraphClient, timeout: float = 30.0) -> None:
    """Wait (async) until the client's server answers, or raise GraphUnavailable."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await client.ping(0.5):
            return
        await asyncio.sleep(0.1)
    raise GraphUnavailable(None, f"no TuringDB server answered at {client.url} within {timeout:g} s")
