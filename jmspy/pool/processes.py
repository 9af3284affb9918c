"""Process workers of a worker pool (``processes=True``): each worker thread owns one child
process holding its own listener instance, so CPU-bound listeners run in parallel past the
GIL. The thread sends the child a picklable copy of the message and waits for its answer;
the pool acknowledges (or redelivers) exactly as for thread workers.

A child that dies mid-message (``SIGKILL``, a crash in a C extension) is noticed by the
broken pipe: the thread starts a new child at once (the pool's size never shrinks), tells
the pool, which says so, and the message is delivered again, marked redelivered.

Children are started with the ``spawn`` method: forking a process that runs threads (the
client's receiver, the pool's workers) can copy a lock in a held state into the child.
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from jmspy.errors import JMSException
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage

from .instances import Handler, ListenerSpec, WorkerDied, load_listener

__all__ = ["ListenerError", "process_handlers"]

_context = multiprocessing.get_context("spawn")

#: the message header fields a child's copy carries
_FIELDS = ("message_id", "timestamp", "correlation_id", "delivery_mode", "expiration",
           "priority", "redelivered", "jms_type", "delivery_time", "delivery_count")


class ListenerError(JMSException):
    """The listener raised in its worker process; the text is its exception and
    traceback (the exception itself may not be picklable)."""


def process_handlers(listener: ListenerSpec,
                     on_death: Callable[[str], None]) -> Callable[[], Handler]:
    """A factory of handlers, each with its own child process (see the module doc)."""
    load_listener(listener)  # refuse a bad listener here, not in every child
    return lambda: _ProcessHandler(listener, on_death)


class _ProcessHandler:
    """One worker's child process, started on first use and replaced when it dies."""

    def __init__(self, listener: ListenerSpec, on_death: Callable[[str], None]) -> None:
        self._listener = listener
        self._on_death = on_death
        self._process: Any = None
        self._pipe: Connection | None = None

    def _start(self) -> Connection:
        parent, child = _context.Pipe()
        process = _context.Process(target=_child_main, args=(child, self._listener),
                                   daemon=True, name="jmspy-pool-process")
        process.start()
        child.close()
        self._process, self._pipe = process, parent
        return parent

    def __call__(self, message: Message) -> None:
        pipe = self._pipe or self._start()
        try:
            pipe.send(_payload(message))
            outcome, text = pipe.recv()
        except (EOFError, OSError, BrokenPipeError):
            process = self._process
            process.join(5)
            why = (f"worker process {process.pid} died (exit code {process.exitcode}) "
                   f"while it handled {message.message_id}")
            self._pipe = None
            self._start()  # the pool is back to full size at once
            self._on_death(why)
            raise WorkerDied(why) from None
        if outcome != "ok":
            raise ListenerError(text)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else int(self._process.pid)

    def close(self) -> None:
        pipe, process = self._pipe, self._process
        self._pipe = None
        if pipe is not None:
            try:
                pipe.send(None)
            except OSError:
                pass  # already gone
            pipe.close()
        if process is not None:
            process.join(5)
            if process.is_alive():
                process.kill()


def _payload(message: Message) -> dict[str, Any]:
    """What a child rebuilds the message from (picklable: no session, no acknowledger)."""
    body: object
    if isinstance(message, TextMessage):
        kind, body = "text", message.text
    elif isinstance(message, BytesMessage):
        kind, body = "bytes", message.body
    elif isinstance(message, MapMessage):
        kind, body = "map", dict(message.map)
    else:
        kind, body = "none", None
    return {"kind": kind, "body": body, "properties": dict(message.properties),
            "fields": {f: getattr(message, f) for f in _FIELDS}}


def _rebuild(payload: dict[str, Any]) -> Message:
    kind, body = payload["kind"], payload["body"]
    message: Message
    if kind == "text":
        message = TextMessage(body, payload["properties"])
    elif kind == "bytes":
        message = BytesMessage(body, payload["properties"])
    elif kind == "map":
        message = MapMessage(body, payload["properties"])
    else:
        message = Message(payload["properties"])
    for name, value in payload["fields"].items():
        setattr(message, name, value)
    return message


def _child_main(pipe: Connection, listener: ListenerSpec) -> None:
    """A worker process: one listener instance, one message at a time, until told to
    stop (None) or the pipe closes. It ignores SIGINT and SIGTERM: Ctrl-C reaches the
    whole process group (and a service manager's SIGTERM often every process), and a child
    that took them would fail its message mid-way; stopping is the pool's job, which lets
    in-flight messages finish and then ends its children."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    handler = load_listener(listener)()
    while True:
        try:
            payload = pipe.recv()
        except (EOFError, OSError):
            return
        if payload is None:
            return
        try:
            handler(_rebuild(payload))
        except BaseException as exc:
            text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            pipe.send(("error", text))
        else:
            pipe.send(("ok", ""))
