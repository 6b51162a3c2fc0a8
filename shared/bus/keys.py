"""Key names of the bus; every name carries the deployment prefix (default "chat:")."""

from __future__ import annotations


class Keys:
    """Names of the event log, inboxes, dead-letter streams and views."""

    __slots__ = ("prefix", "events")

    def __init__(self, prefix: str = "chat:") -> None:
        self.prefix = prefix
        self.events = f"{prefix}events"

    def inbox(self, service: str) -> str:
        return f"{self.prefix}work:{service}"

    def dead(self, service: str) -> str:
        return f"{self.prefix}dead:{service}"

    def session(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    def job(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    def user_sessions(self, user_id: str) -> str:
        return f"{self.prefix}user:{user_id}:sessions"

    def cancel(self, job_id: str) -> str:
        """Set while a cancel of the job is asked for; workers look at it at safe points."""
        return f"{self.prefix}cancel:{job_id}"

    def __repr__(self) -> str:
        return f"Keys({self.prefix!r})"
