"""Exit codes of `chat-agent ask` and `chat-agent sessions`, which scripts may rely on."""

from __future__ import annotations

EXIT_OK = 0
EXIT_JOB_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_UNREACHABLE = 3
EXIT_RATE_LIMITED = 4
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit codes:
  0    answered (or the sessions action succeeded)
  1    the job ended in error or was cancelled, or the gateway failed (5xx); message on stderr
  2    bad input: usage, or a 4xx from the gateway (field and reason on stderr)
  3    the gateway is unreachable (the URL is named)
  4    rate limited (Retry-After on stderr)
  130  interrupted with Ctrl-C (the job is cancelled)"""
