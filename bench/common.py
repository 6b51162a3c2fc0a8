"""Helpers shared by the benches: CPU pinning, percentiles, RSS, child processes, a loaded graph."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bus import pinned  # noqa: E402,F401  (re-exported: one way to pin a child's argv)


def pin(pid: int, cpu: str) -> None:
    """Pin every thread of a running process to `cpu` (taskset -a -p); no-op when cpu is ''."""
    if cpu and shutil.which("taskset"):
        subprocess.run(["taskset", "-a", "-pc", cpu, str(pid)], check=True, capture_output=True)


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def rss_mb(pid: int) -> float:
    """Resident set size of a process in MB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table with columns padded for the terminal."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(str(c).rjust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def graph_settings(base: Path, port: int, graph: str = "bench_reactome") -> object:
    """Settings for a TuringDB server on `port` whose directory is base/'turingdb'."""
    from shared.config import load_settings

    state = base / "state"
    state.mkdir(exist_ok=True)
    if not (state / "turingdb").exists():
        (state / "turingdb").symlink_to(base / "turingdb")
    return load_settings({}, turingdb_url="127.0.0.1", turingdb_port=port, turingdb_graph=graph,
                         state_dir=str(state), log_format="console", log_level="warning")


def fixture_subset(dst: Path) -> Path:
    """The test fixture's Reactome subset (tests/fixtures/turingdb.py cut_subset) written to dst."""
    from tests.fixtures.turingdb import cut_subset

    return cut_subset(dst)
