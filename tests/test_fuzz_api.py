"""schemathesis against /openapi.json of a real gateway process (real Valkey, real sockets).

Two runs of the schemathesis CLI, each against its own `python -m services.gateway`:
every operation through the examples, coverage and fuzzing phases (positive and
negative data), then the stateful phase, which follows the document's links
(POST /chat/message -> GET job, cancel, GET/PATCH/DELETE session) as one user.
Every check is on: no 5xx, status codes, content types, headers and bodies as the
document says, bad requests refused with a 4xx, valid ones accepted, Allow on 405.

/readyz is exempt from "no 5xx" only: with no TuringDB and no workers, 503 naming
what is down is its documented answer. Rerun with another seed: FUZZ_SEED=7.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shared.bus.keys import Keys
from tests.fuzz_support import REPORT_DIR, assert_all_held, gateway_process, record, reliability_table  # noqa: F401

SEED = int(os.environ.get("FUZZ_SEED", "20261202"))
MAX_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "30"))
STATEFUL_EXAMPLES = int(os.environ.get("FUZZ_STATEFUL_EXAMPLES", "60"))
CONFIG = """\
max-stream-events = 1   # an SSE stream of a live job never ends by itself: one event is enough
request-timeout = 3

[checks]
enabled = true

[[operations]]
include-path = "/readyz"
checks.not_a_server_error.enabled = false
"""


def run_schemathesis(url: str, workdir: Path, name: str, *extra: str, examples: int = MAX_EXAMPLES) -> tuple[dict[str, Any], str, float]:
    """Run `schemathesis run` on the gateway's document; (JSON report, output, seconds)."""
    config = workdir / "schemathesis.toml"
    config.write_text(CONFIG)
    report = workdir / f"{name}.json"
    args = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run", f"{url}/openapi.json",
        "--max-examples", str(examples), "--seed", str(SEED), "--workers", "1",
        "--report", "json", "--report-json-path", str(report), *extra,
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(args, cwd=workdir, capture_output=True, text=True, timeout=240, env={**os.environ, "NO_COLOR": "1"})
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    REPORT_DIR.mkdir(exist_ok=True)
    (REPORT_DIR / f"schemathesis-{name}.txt").write_text(output)
    assert report.exists(), output[-4000:]
    return json.loads(report.read_text()), output, seconds


def _held(report: dict[str, Any]) -> tuple[int, int]:
    cases = report["test_cases"]
    return int(cases["generated"]), int(cases["generated"]) - int(cases["with_failures"]) - int(cases["errored"])


def test_every_operation_holds_against_generated_requests(redis_url: str, keys: Keys, tmp_path: Path) -> None:
    with gateway_process(redis_url, keys, tmp_path / "gateway.log") as gw:
        report, output, seconds = run_schemathesis(gw.url, tmp_path, "operations", "--phases", "examples,coverage,fuzzing")
        server_errors = gw.server_errors()
    tried, held = _held(report)
    ops = report["operations"]
    record(
        "schemathesis", "every operation: examples, coverage, fuzzing (all checks)", tried, held, seconds,
        f"{ops['tested']}/{ops['total']} operations, seed {SEED}, -n {MAX_EXAMPLES}",
    )  # fmt: skip
    failures = [*report["failures"], *report["errors"], *server_errors]
    assert ops["tested"] == ops["total"], output[-4000:]
    assert report["exit_code"] == 0, output[-6000:]
    assert_all_held(tried, held, failures, "schemathesis operations")


def test_stateful_links_hold(redis_url: str, keys: Keys, tmp_path: Path) -> None:
    with gateway_process(redis_url, keys, tmp_path / "gateway.log") as gw:
        report, output, seconds = run_schemathesis(
            gw.url, tmp_path, "stateful", "--phases", "stateful", "--header", "X-Anon-Id: fuzz-user", examples=STATEFUL_EXAMPLES
        )
        server_errors = gw.server_errors()
    tried, held = _held(report)
    links = re.search(r"API Links:\s+(\d+) covered / (\d+) selected", output)
    scenarios = re.search(r"Scenarios:\s+(\d+)", output)
    note = f"{scenarios.group(1) if scenarios else '?'} scenarios, links {links.group(1)}/{links.group(2)} covered" if links else ""
    record("schemathesis", "stateful: links from POST /chat/message and PATCH session", tried, held, seconds, note)
    assert report["exit_code"] == 0, output[-6000:]
    assert links and int(links.group(1)) >= 3, output[-3000:]  # links are followed
    assert_all_held(tried, held, [*report["failures"], *report["errors"], *server_errors], "schemathesis stateful")
