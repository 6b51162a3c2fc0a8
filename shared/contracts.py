"""Message contracts shared by every service (msgspec Structs).

The public shapes (ChatRequest, JobRecord, ChatSession, ...) are what clients see;
EventRecord and JobTask are what travels on the streams.
"""

from __future__ import annotations

import enum
import time
import uuid
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

import msgspec

RouteType = Literal["lookup", "agent"]
MAX_MESSAGE_CHARS = 8000


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def new_id() -> str:
    return str(uuid.uuid4())


class JobStatus(str, enum.Enum):
    pending = "pending"
    running = "running"
    done = "done"
    error = "error"
    cancelled = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (JobStatus.done, JobStatus.error, JobStatus.cancelled)


class TokenUsage(msgspec.Struct, frozen=True):
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class JobEvent(msgspec.Struct):
    """One step of a job as a user sees it (routing_done, tool_call, job_done ...)."""

    type: str
    data: dict[str, Any] = {}


class Message(msgspec.Struct):
    role: str
    content: str
    route: RouteType | None = None
    confidence: float | None = None
    events: list[JobEvent] = []


class ChatSession(msgspec.Struct):
    session_id: str = msgspec.field(default_factory=new_id)
    messages: list[Message] = []
    pending_job_id: str | None = None
    pending_events: list[JobEvent] = []
    name: str | None = None
    created_at: datetime = msgspec.field(default_factory=utc_now)

    def add(
        self,
        role: str,
        content: str,
        route: RouteType | None = None,
        confidence: float | None = None,
    ) -> Message:
        """Append a message; an assistant message takes the pending events with it."""
        events: list[JobEvent] = []
        if role == "assistant":
            events, self.pending_events = self.pending_events, []
            self.pending_job_id = None
        message = Message(role, content, route, confidence, events)
        self.messages.append(message)
        return message

    def add_event(self, type: str, data: dict[str, Any] | None = None) -> JobEvent:
        event = JobEvent(type, data or {})
        self.pending_events.append(event)
        return event

    def history_for_llm(self, max_turns: int = 10) -> list[dict[str, str]]:
        """The last `max_turns` user/assistant pairs as OpenAI chat messages."""
        if max_turns <= 0:
            return []
        chat = [m for m in self.messages if m.role in ("user", "assistant")]
        return [{"role": m.role, "content": m.content} for m in chat[-2 * max_turns :]]


MessageText = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_MESSAGE_CHARS)]
SessionName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class ChatRequest(msgspec.Struct, forbid_unknown_fields=True):
    message: MessageText
    session_id: str | None = None


class RenameRequest(msgspec.Struct, forbid_unknown_fields=True):
    name: SessionName


class ChatResponse(msgspec.Struct):
    session_id: str
    answer: str
    route_taken: RouteType
    sources: list[dict[str, Any]] = []
    token_usage: TokenUsage = TokenUsage()


class RouterDecision(msgspec.Struct):
    route: RouteType
    confidence: float
    reasoning: str = ""
    token_usage: TokenUsage = TokenUsage()


class JobRecord(msgspec.Struct):
    job_id: str
    session_id: str
    user_id: str | None
    is_new_session: bool
    message: str
    status: JobStatus = JobStatus.pending
    created_at: datetime = msgspec.field(default_factory=utc_now)
    result: ChatResponse | None = None
    error: str | None = None


class JobSubmission(msgspec.Struct):
    job_id: str
    session_id: str
    status: JobStatus = JobStatus.pending


# --- what travels on the streams -------------------------------------------------


class EventRecord(msgspec.Struct):
    """One entry of the event log: a JobEvent with the job it belongs to."""

    type: str
    job_id: str
    session_id: str
    data: dict[str, Any] = {}
    ts: float = msgspec.field(default_factory=time.time)

    def as_job_event(self) -> JobEvent:
        return JobEvent(self.type, self.data)


class JobTask(msgspec.Struct):
    """An inbox entry: the work a service is asked to do for one job."""

    job_id: str
    session_id: str
    message: str
    user_id: str | None = None
    history: list[dict[str, str]] = []
    decision: RouterDecision | None = None
    submitted_at: float = msgspec.field(default_factory=time.time)


_encoder = msgspec.json.Encoder()
_event_decoder = msgspec.json.Decoder(EventRecord)
_task_decoder = msgspec.json.Decoder(JobTask)


def encode(obj: Any) -> bytes:
    """JSON bytes of any contract (one reused encoder)."""
    return _encoder.encode(obj)


def decode_event(raw: bytes | str) -> EventRecord:
    return _event_decoder.decode(raw)


def decode_task(raw: bytes | str) -> JobTask:
    return _task_decoder.decode(raw)


def job_done_event(job_id: str, response: ChatResponse) -> EventRecord:
    """The terminal event of a job that produced an answer."""
    return EventRecord("job_done", job_id, response.session_id, {"result": msgspec.to_builtins(response)})


def job_error_event(job_id: str, session_id: str, error: str, **extra: Any) -> EventRecord:
    """The terminal event of a job that failed, with a reason a user can read."""
    return EventRecord("job_error", job_id, session_id, {"error": error, **extra})
