"""The LLM stand-in as its own process: the scripted OpenAI-compatible server of the tests.

    python bench/llm_standin.py [--delay 0.2] [--answer "..."]

Every chat completion waits `--delay` seconds, then answers `--answer` with no tool
call (streamed when asked to). Prints its base URL on one line, then serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.llm_server import Reply, ScriptedLLMServer  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--answer", default="The PI3K/AKT pathway promotes cell survival.")
    args = p.parse_args()
    server = ScriptedLLMServer()
    server.script = lambda body: Reply(content=args.answer, delay=args.delay, chunk_chars=len(args.answer))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # before the thread starts
    server.start()
    print(server.url, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.stop()


if __name__ == "__main__":
    main()
