"""``jmspy worker``: the command-line container for :class:`jmspy.pool.WorkerPool` (what
``celery worker`` is to Celery tasks, or an application server to a message-driven bean).

Why a container and not just the class: a worker is a long-running process that an
operator starts, watches and stops. So the command shows a live status line, stops
gracefully on SIGTERM/SIGINT (in-flight messages finish and are acknowledged; the rest go
back to the broker), and turns every mistake into one line saying what to fix -- never a
traceback, which would bury the fix. Exit codes: 0 done, 1 runtime failure (broker down
or lost), 2 usage error, 130 a second Ctrl-C while stopping. The pool and the transports
are imported only when the command runs, so ``jmspy --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from jmspy.cli_password import PasswordError, add_password_options, resolve_password
from jmspy.cli_support import HelpFormatter, at_least, port_problem
from jmspy.errors import InvalidConfigurationException, InvalidSelectorException, JMSException

if TYPE_CHECKING:
    from jmspy.pool import WorkerPool

__all__ = ["add_command", "url_problem", "worker_command"]

_BOOLS = {"true": True, "yes": True, "on": True, "1": True,
          "false": False, "no": False, "off": False, "0": False}


def _prefetch(text: str) -> int | str:
    if text == "pool" or (text.isdigit() and text.isascii()):
        return text if text == "pool" else int(text)
    raise argparse.ArgumentTypeError(f"{text!r} is neither 'pool' nor an integer >= 0")


def add_command(sub: Any) -> None:
    """Register ``worker`` on ``jmspy``'s sub-parsers."""
    p = sub.add_parser(
        "worker", help="run a worker pool: LISTENER handles DESTINATION's messages",
        usage="jmspy worker URL DESTINATION LISTENER [--pool N] [options]",
        formatter_class=HelpFormatter,
        description="Consume DESTINATION at URL with a pool of LISTENER instances "
        "(jmspy.pool.WorkerPool). Ctrl-C or SIGTERM stops gracefully; Ctrl-C twice exits "
        "at once. A status line goes to stderr, the summary to stdout. Exit 0 done, 1 the "
        "broker was lost, 2 a usage or configuration error.")
    p.add_argument("url", metavar="URL",
                   help="the broker: stomp://host:port or mqtt://host:port (ports 1-65535; "
                   "several, comma-separated, for failover). Not vm://: an in-process "
                   "broker in the worker's own process is one nobody else can reach; start "
                   "`jmspy broker` and use stomp://")
    p.add_argument("destination", metavar="DESTINATION", help="queue name (topic with --topic)")
    p.add_argument("listener", metavar="LISTENER", help="module:function or module:Class "
                   "(one instance per worker), imported with the current directory on sys.path")
    flag: dict[str, Any] = {"action": "store_true"}
    seconds = at_least(0, float, "a number of seconds")
    for name, kw, text in (
        ("--pool", {"type": at_least(1), "default": 32, "metavar": "N"},
         "maxPoolSize: most messages processed at once (default 32)"),
        ("--processes", flag, "run each worker in its own process (CPU-bound listeners)"),
        ("--selector", {"metavar": "SEL"}, 'JMS message selector, e.g. "prio > 4"'),
        ("--topic", flag, "DESTINATION is a topic, not a queue"),
        ("--durable", {"metavar": "NAME"},
         "durable topic subscription NAME (implies --topic; needs --client-id)"),
        ("--client-id", {"metavar": "ID"}, "the connection's client id"),
        ("--prefetch", {"type": _prefetch, "metavar": "{pool,N}"},
         "imqConsumerFlowLimit: 'pool' sizes it from --pool (default: the factory's, 1000)"),
        ("--redelivery-attempts", {"type": at_least(0), "metavar": "N"},
         "redeliveries after the listener raises, then dead-letter (default 6)"),
        ("--redelivery-interval", {"type": at_least(0), "metavar": "MS"},
         "ms between a failure and the redelivery (default 500)"),
        ("--no-dmq", flag, "leave undeliverable messages unacknowledged instead of sending "
         "them to the dead message queue"),
        ("--dlq", {"metavar": "NAME"}, "dead message queue name (default DLQ)"),
        ("--steady", {"type": at_least(0), "metavar": "N"},
         "workers kept even when idle (default 10, at most --pool)"),
        ("--user", {}, "user name for the broker"),
        ("--property", {"action": "append", "default": [], "metavar": "NAME=VALUE"},
         "any connection factory property, repeatable (e.g. imqConsumerFlowLimit=16)"),
        ("--count", {"type": at_least(1), "metavar": "N"},
         "stop after N messages processed (scripts, tests)"),
        ("--status-interval", {"type": seconds, "default": 1.0, "metavar": "S"},
         "seconds between status lines on stderr (default 1.0)"),
        ("--stop-timeout", {"type": seconds, "default": 30.0, "metavar": "S"},
         "seconds a stop waits for in-flight messages (default 30)"),
    ):
        p.add_argument(name, help=text, **kw)
    add_password_options(p)
    p.set_defaults(func=worker_command)


def url_problem(url: str) -> str | None:
    """Why the worker cannot consume from ``url``, or None. A ``vm://`` broker lives in
    the process that starts it: the worker's own would be a new, empty broker that no
    producer in another process can reach, and the worker would wait forever without a
    word. A port out of range is refused here, before anything connects (the URL parser
    would raise a bare ValueError). Schemes and the list syntax are the connection
    factory's to check."""
    for entry in (part.strip() for part in url.split(",")):
        parts = urlsplit(entry)
        if parts.scheme == "vm":
            return (f"{entry}: a vm:// broker exists only inside the process that starts "
                    "it, so this worker would consume from a new, empty broker nobody else "
                    "can reach. Run `jmspy broker` and give the worker its address "
                    "(stomp://127.0.0.1:61613), or run jmspy.pool.WorkerPool inside the "
                    "process that owns the vm:// broker")
        host_port = parts.netloc.rpartition("@")[2]
        if ":" not in host_port.rpartition("]")[2]:
            continue  # no port: the transport's default
        text = host_port.rpartition(":")[2]
        if not (text.isascii() and text.isdigit()):
            return f"{entry}: {text!r} is not a port number: use an integer 1-65535"
        problem = port_problem(int(text))
        if problem is not None:
            return f"{entry}: {problem}"
    return None


def _factory_properties(args: argparse.Namespace) -> dict[str, Any]:
    """``--user``/the password (:mod:`jmspy.cli_password`)/``--property`` as factory
    properties. Strings are
    converted with each property's declared type (``PROPERTIES``), because the factory
    validates types and ``"16"`` is not an int."""
    from jmspy.properties import FactoryProperties

    props: dict[str, Any] = {}
    if args.user is not None:
        props["imqDefaultUsername"] = args.user
    try:
        password = resolve_password(args)
    except PasswordError as exc:
        raise InvalidConfigurationException(str(exc)) from None
    if password is not None:
        props["imqDefaultPassword"] = password
    for item in args.property:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise InvalidConfigurationException(
                f"--property {item!r} must be NAME=VALUE, e.g. imqConsumerFlowLimit=16")
        spec = FactoryProperties.spec(name.strip())  # unknown: raises, naming the known
        value: Any = _BOOLS.get(text.strip().lower(), text) if spec.type is bool else text
        try:
            props[spec.name] = spec.validate(value)
        except InvalidConfigurationException as exc:
            raise InvalidConfigurationException(f"--property {item}: {exc}") from None
    return props


def _activation(args: argparse.Namespace) -> dict[str, Any]:
    """The options that are activation properties, only when given (the pool's
    defaults are Glassfish's, documented in one place: :mod:`jmspy.pool.activation`)."""
    act: dict[str, Any] = {}
    if args.topic or args.durable:
        act["destinationType"] = "topic"
    if args.durable:
        if not args.client_id and not any(p.startswith("clientID=") for p in args.property):
            raise InvalidConfigurationException(
                f"--durable {args.durable} needs --client-id ID: a durable subscription "
                "belongs to one client id")
        act.update(subscriptionDurability="Durable", subscriptionName=args.durable)
    for option, name in (("selector", "messageSelector"), ("client_id", "clientId"),
                         ("redelivery_attempts", "endpointExceptionRedeliveryAttempts"),
                         ("redelivery_interval", "endpointExceptionRedeliveryInterval"),
                         ("dlq", "deadLetterQueue"), ("steady", "steadyPoolSize")):
        if getattr(args, option) is not None:
            act[name] = getattr(args, option)
    if args.no_dmq:
        act["sendUndeliverableMsgsToDMQ"] = False
    return act


class _Status(logging.StreamHandler):  # type: ignore[type-arg]
    """The live status line, and the log handler that prints over it. On a terminal the
    line is rewritten in place (``\\r``) so it does not scroll; in a log file or pipe each
    update is its own line, since ``\\r`` would make one unreadable line. A log record
    clears the line first so the two never interleave."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.setFormatter(logging.Formatter("jmspy worker: %(levelname)s: %(message)s"))
        self.tty, self.width, self.line_lock = stream.isatty(), 0, threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        self.clear()
        super().emit(record)

    def show(self, line: str) -> None:
        with self.line_lock:
            if self.tty:
                self.stream.write("\r" + line.ljust(self.width))
                self.width = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def clear(self) -> None:
        with self.line_lock:
            if self.tty and self.width:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
                self.width = 0

    def install(self) -> None:
        """WARNING and above from the ``jmspy`` loggers go here: the pool's start-up
        warning ("you are reducing the pool") and dead-lettering are the operator's
        business. Not propagated, so a listener module that calls ``basicConfig`` does not
        print them twice. stomp.py's own log is silenced: the transport turns its failures
        into errors that say what to do (printed once), and its socket chatter as a
        connection closes ("error sending frame" and a traceback) is noise here."""
        jmspy_log = logging.getLogger("jmspy")
        jmspy_log.addHandler(self)
        jmspy_log.setLevel(logging.WARNING)
        jmspy_log.propagate = False
        logging.getLogger("stomp.py").setLevel(logging.CRITICAL)


def _kill_children() -> None:
    """Exiting at once (a second Ctrl-C): kill the ``--processes`` children, which ignore
    SIGINT and SIGTERM (the pool ends them on a normal stop); their messages were not
    acknowledged, so the broker delivers them again."""
    multiprocessing = sys.modules.get("multiprocessing")  # not loaded: no children
    for child in multiprocessing.active_children() if multiprocessing else ():
        child.kill()


def worker_command(args: argparse.Namespace) -> int:
    """Run ``jmspy worker`` (see the module docstring); returns the exit code."""
    from jmspy import ConnectionFactory
    from jmspy.pool import WorkerPool
    from jmspy.pool.instances import load_listener

    problem = url_problem(args.url)
    if problem is not None:
        print(f"jmspy worker: error: {problem}", file=sys.stderr)
        return 2
    status = _Status(sys.stderr)
    status.install()
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like celery: ./tasks.py is importable
    try:
        factory = ConnectionFactory(args.url, **_factory_properties(args))
        try:
            load_listener(args.listener)  # here, so a bad one is reported before connecting
        except JMSException:
            raise
        except Exception as exc:  # the listener's own module raised while importing
            raise InvalidConfigurationException(
                f"listener {args.listener!r}: importing it raised {type(exc).__name__}: "
                f"{exc}; fix that module") from None
        pool = WorkerPool(factory, args.destination, args.listener, max_pool_size=args.pool,
                          processes=args.processes, prefetch=args.prefetch,
                          **_activation(args))
    except InvalidConfigurationException as exc:
        print(f"jmspy worker: error: {exc}", file=sys.stderr)
        return 2

    stop, stopping = threading.Event(), threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if not stopping.is_set():
            stop.set()
        elif signum == signal.SIGINT:  # the operator insists
            status.clear()
            print("jmspy worker: interrupted again: exiting now; unfinished messages go "
                  "back to the broker (redelivered)", file=sys.stderr, flush=True)
            sys.stdout.flush()
            _kill_children()
            os._exit(130)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    started = time.monotonic()
    try:
        pool.start()
    except JMSException as exc:  # a mistake only the broker sees, or the broker is down
        print(f"jmspy worker: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidConfigurationException | InvalidSelectorException) else 1
    kind = "processes" if args.processes else "threads"
    print(f"jmspy worker: {pool.spec.destination_type} {args.destination!r} at {args.url}, "
          f"listener {args.listener}, pool {args.pool} {kind} (at most {pool.concurrency} at "
          "once); Ctrl-C to stop", file=sys.stderr, flush=True)
    lost = _run(pool, args, status, stop)
    stopping.set()
    if stop.is_set():
        status.clear()
        print(f"jmspy worker: stopping: waiting up to {args.stop_timeout:g} s for "
              f"{pool.stats()['in_flight']} message(s) in flight (Ctrl-C again to exit now)",
              file=sys.stderr, flush=True)
    pool.stop(args.stop_timeout)
    elapsed = time.monotonic() - started
    status.clear()
    s = pool.stats()
    print(f"jmspy worker: {s['processed']} processed, {s['failed']} failed, "
          f"{s['redelivered']} redelivered, {s['dead_lettered']} dead-lettered; peak "
          f"concurrency {s['peak_concurrency']}/{args.pool}; {elapsed:.2f} s, "
          f"{s['processed'] / elapsed:,.1f} msgs/s on average", flush=True)
    if lost:
        print(f"jmspy worker: error: stopped taking messages from {args.url} (see the error "
              "above); check the broker, or set --property imqReconnectEnabled=true",
              file=sys.stderr)
        return 1
    return 0


def _run(pool: WorkerPool, args: argparse.Namespace, status: _Status,
         stop: threading.Event) -> bool:
    """Show the status every interval until a signal, ``--count``, or the pool stops
    taking messages (returns True then: the connection was lost)."""
    tick = min(args.status_interval, 0.05)  # how soon --count and a lost broker are seen
    last_time, last_done = time.monotonic(), 0
    while not stop.wait(tick):
        stats = pool.stats()
        if args.count is not None and stats["processed"] >= args.count:
            return False
        if not pool.running:  # receiving failed: the broker is gone (no reconnect)
            return True
        now = time.monotonic()
        if now - last_time >= args.status_interval:
            rate = (stats["processed"] - last_done) / (now - last_time)
            last_time, last_done = now, stats["processed"]
            status.show(f"processed {stats['processed']}  {rate:,.1f} msgs/s  busy "
                        f"{stats['busy']}/{args.pool}  in flight {stats['in_flight']}  "
                        f"failed {stats['failed']}  dead-lettered {stats['dead_lettered']}")
    return False
