"""The Valkey Streams bus: key names, clients, the event log and the worker runtime."""

from shared.bus.connection import connect
from shared.bus.keys import Keys
from shared.bus.log import EVENT_FIELD, TASK_FIELD, add_event, add_task, publish, read_events
from shared.bus.worker import Delivery, Handler, Outcome, Worker

__all__ = [
    "EVENT_FIELD",
    "TASK_FIELD",
    "Delivery",
    "Handler",
    "Keys",
    "Outcome",
    "Worker",
    "add_event",
    "add_task",
    "connect",
    "publish",
    "read_events",
]
