"""The command-line client of the gateway: `chat-agent ask` and `chat-agent sessions`.

Small modules: `api` (HTTP calls and the errors a script sees as exit codes), `sse`
(the job's event stream, resumed with Last-Event-ID), `render` (Markdown for a
terminal), `steps` (one line per job event), `commands` (the two CLI targets).
"""

from services.client.exits import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_JOB_ERROR,
    EXIT_OK,
    EXIT_RATE_LIMITED,
    EXIT_UNREACHABLE,
)

__all__ = [
    "EXIT_OK",
    "EXIT_JOB_ERROR",
    "EXIT_BAD_INPUT",
    "EXIT_UNREACHABLE",
    "EXIT_RATE_LIMITED",
    "EXIT_INTERRUPTED",
]
