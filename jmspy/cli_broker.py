"""``jmspy broker``, ``jmspy stat`` and ``jmspy hash-password``: the bundled broker over
STOMP, its counters, and a password hash for its ``[security]`` config.

The broker modules are imported only when a command runs (``jmspy demo`` need not load
asyncio and the STOMP server), and through :func:`importlib.import_module` because
``jmspy.broker_ref`` is installed from the top-level ``broker_ref/`` directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import importlib
import sys
from typing import Any, TextIO

from jmspy.cli_password import PasswordError, add_password_options, resolve_password
from jmspy.cli_support import HelpFormatter, at_least, port

__all__ = ["add_commands"]


def _broker(args: argparse.Namespace) -> int:
    config_mod: Any = importlib.import_module("jmspy.broker_ref.config")
    runner: Any = importlib.import_module("jmspy.broker_ref.protocols.stomp.runner")
    config = config_mod.load_config(args.config)
    if args.host is not None:
        config.host = args.host
    if args.port is not None:
        config.port = args.port
    if args.loop is not None:
        config.loop = args.loop
    if args.tls_port is not None or args.tls_only:
        if config.tls is None:
            option = "--tls-port" if args.tls_port is not None else "--tls-only"
            print(f"jmspy: error: {option} needs a TLS listener configured: add a "
                  "[broker.tls] table with cert and key to the --config file",
                  file=sys.stderr)
            return 2
        if args.tls_only and args.port is not None:
            print("jmspy: error: --port names the plain-text listener, which --tls-only turns "
                  "off; give --tls-port instead", file=sys.stderr)
            return 2
        changes: dict[str, Any] = {}
        if args.tls_port is not None:
            changes["port"] = args.tls_port
        if args.tls_only:
            changes["only"] = True
        config.tls = dataclasses.replace(config.tls, **changes)
        config_mod.check_ports(config, "--port and --tls-port")
    if args.metrics_port is not None:
        config.metrics_port = args.metrics_port
    if args.mqtt_port is not None:
        config.mqtt_port = args.mqtt_port
    if args.mqtt_tls_port is not None:
        config.mqtt_tls_port = args.mqtt_tls_port
    if args.idle_spin_us is not None:
        config.idle_spin_us = args.idle_spin_us
        config_mod.check_idle_spin(config, "--idle-spin-us")
    if args.data_dir is not None:
        config.data_dir = args.data_dir
    if args.in_memory:
        config.data_dir = None
    if args.check:
        return _check(config.data_dir)
    runner.loop_factory(config.loop)  # a missing uvloop: its error, before the line below
    default = config_mod.default_loop()
    print(_loop_line(config.loop, default, chosen=args.loop is not None), file=sys.stderr,
          flush=True)
    try:
        result: int = runner.run_broker(config)
    except runner.StoreError as exc:
        print(f"jmspy: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"jmspy: error: cannot listen on {config.host}:{config.port}: {exc.strerror}",
              file=sys.stderr)
        return 2
    return result


def _loop_line(loop: str, default: str, *, chosen: bool) -> str:
    """The startup line naming the event loop, so a slow broker on asyncio is not a mystery.

    It goes to stderr (like "jmspy broker stopped"): the first stdout line is the
    "listening on" line that scripts and tests wait for, and stays unchanged.
    """
    if chosen:
        why = "--loop"
    elif loop != default:
        why = "[broker] loop in the config"
    elif loop == "uvloop":
        why = "the default: installed; --loop asyncio for the standard library's"
    else:
        why = "the default: uvloop is not installed"
    return f"jmspy broker: {loop} event loop ({why})"


def _check(data_dir: str | None) -> int:
    data_mod: Any = importlib.import_module("jmspy.broker_ref.data_dir")
    if data_dir is None:
        print("jmspy: error: --check verifies a data directory; --in-memory has none",
              file=sys.stderr)
        return 2
    try:
        code, lines = data_mod.check(data_dir)
    except Exception as exc:  # an exit code and a sentence, never a traceback
        print(f"jmspy: error: cannot check the data directory {data_dir}: {exc}",
              file=sys.stderr)
        return int(data_mod.CHECK_UNUSABLE)
    print("\n".join(lines), file=sys.stdout if code != data_mod.CHECK_UNUSABLE else sys.stderr)
    return int(code)


def _stat(args: argparse.Namespace) -> int:
    client: Any = importlib.import_module("jmspy.broker_ref.protocols.stomp.client")
    try:
        password = resolve_password(args)
    except PasswordError as exc:
        print(f"jmspy: error: {exc}", file=sys.stderr)
        return 2
    try:
        rows, usage = client.fetch_report(args.host, args.port, user=args.user,
                                          password=password, timeout=args.timeout)
    except (OSError, client.StatsError) as exc:
        hint = ""
        if isinstance(exc, ConnectionRefusedError):
            hint = (f"; is a jmspy broker listening there? start one with `jmspy broker "
                    f"--port {args.port}`, or give --host/--port of the running one")
        print(f"jmspy: error: cannot read stats from {args.host}:{args.port}: {exc}{hint}",
              file=sys.stderr)
        return 1
    if usage:
        print(client.format_usage(usage))
    print(client.format_table(rows))
    return 0


def add_commands(sub: Any) -> None:
    """Register ``broker``, ``stat`` and ``hash-password`` on ``jmspy``'s sub-parsers."""
    broker = sub.add_parser(
        "broker", help="run the bundled broker over STOMP (default 127.0.0.1:61613)",
        formatter_class=HelpFormatter,
        description="Run the bundled reference broker, serving STOMP 1.0-1.2 on HOST:PORT "
        "until SIGINT or SIGTERM. Its first line on stdout, \"jmspy broker listening on "
        "HOST:PORT (...)\", is printed once it accepts connections (scripts can wait for "
        "it). Options override the --config file, which overrides the embedded defaults.")
    broker.add_argument("--config", metavar="FILE",
                        help="TOML config file (default: the embedded config)")
    broker.add_argument("--host", help="listen address (overrides [broker] host; default "
                        "127.0.0.1)")
    broker.add_argument("--port", type=port(zero="any free port"),
                        help="listen port, 1-65535, or 0 for any free port (the "
                        "\"listening on\" line names it); overrides [broker] port; "
                        "default 61613")
    broker.add_argument("--tls-port", type=port(zero="any free port"),
                        help="TLS listen port, 1-65535, or 0 for any free port (overrides "
                        "[broker.tls] port; default 61614); the TLS listener itself "
                        "(certificate, key, client certificates) is configured in "
                        "[broker.tls] of the --config file, and a second \"listening on\" "
                        "line names its port")
    broker.add_argument("--mqtt-port", type=port(zero="any free port"),
                        help="serve MQTT 3.1.1 and 5 on this port too (1883 is MQTT's; 0 "
                        "for any free port); overrides [broker.mqtt] port")
    broker.add_argument("--mqtt-tls-port", type=port(zero="any free port"),
                        help="serve MQTT over TLS on this port too (8883 is MQTT's; 0 for "
                        "any free port), with the certificate and client-certificate rules "
                        "of [broker.tls] in the --config file; overrides [broker.mqtt] "
                        "tls-port")
    broker.add_argument("--metrics-port", type=port(zero="any free port"),
                        help="serve /metrics (the Prometheus text format) and the "
                        "management API (/api/, JSON; needs pip install 'jmspy[http]') on "
                        "this port of [broker.http] host (default 127.0.0.1), or 0 for any "
                        "free port; a \"metrics on\" line names the address; default: "
                        "not served")
    broker.add_argument("--tls-only", action="store_true",
                        help="serve STOMP over TLS only, with no plain-text listener "
                        "(overrides [broker.tls] only; needs [broker.tls])")
    broker.add_argument("--loop", choices=("asyncio", "uvloop"),
                        help="event loop (overrides [broker] loop; default uvloop when "
                        "installed, as it is with jmspy on CPython off Windows, else "
                        "asyncio); asyncio forces the standard library's loop")
    broker.add_argument("--idle-spin-us", type=int, metavar="US",
                        help="after a read, poll this many microseconds before sleeping, "
                        "adaptively (overrides [broker] idle-spin-us; default 100, 0 = off, "
                        "at most 1000)")
    where = broker.add_mutually_exclusive_group()
    where.add_argument("--data-dir", metavar="DIR",
                       help="keep persistent messages, acks and durable subscriptions in DIR "
                       "(default ./jmspy-data, created if missing; overrides [broker] "
                       "data-dir): they survive a restart or a crash, and a RECEIPT means "
                       "the message is on disk")
    where.add_argument("--in-memory", action="store_true",
                       help="keep everything in memory (lost when the broker stops)")
    broker.add_argument("--check", action="store_true",
                        help="do not serve: check the data directory's store offline and "
                        "report what a starting broker would recover; changes and creates "
                        "nothing (the salvage of a damaged store runs when the broker "
                        "starts). Exit 0: healthy; 1: damage found (the report says what "
                        "would be recovered and lost); 2: cannot check (no store in the "
                        "directory, unreadable, or a broker is using it)")
    broker.set_defaults(func=_broker)
    stat = sub.add_parser(
        "stat", help="print the usage and per-destination counters of a running broker",
        formatter_class=HelpFormatter,
        description="Ask a running jmspy broker for its counters (a SEND to /jmspy/stats) "
        "and print them: a line of broker-wide usage (store, temp space, memory, "
        "connections turned away), then a table with one row per destination. The "
        "temporary queue stat itself receives the answer on is left out. Exit 1 when the "
        "broker cannot be reached or refuses (the reason is printed once).")
    stat.add_argument("--host", default="127.0.0.1", help="the broker's address")
    stat.add_argument("--port", type=port(), default=61613,
                      help="the broker's STOMP port, 1-65535")
    stat.add_argument("--user", help="user name (with the admin permission, when the "
                      "broker has security)")
    add_password_options(stat)
    stat.add_argument("--timeout", type=at_least(0, float, "a number of seconds"),
                      default=5.0, metavar="S",
                      help="seconds to wait for the connection and the answer")
    stat.set_defaults(func=_stat)
    hashing = sub.add_parser(
        "hash-password", help="print a pbkdf2_sha256 hash for a [security] password-hash key",
        formatter_class=HelpFormatter,
        description="Read a password and print its pbkdf2_sha256 hash, for a user's "
        "password-hash key in the broker's [security] config (so the config holds no "
        "plain password). On a terminal it prompts twice without echo and prints nothing "
        "if the two differ; otherwise it reads one line from stdin (a pipe or a file: "
        "printf '%s\\n' \"$PW\" | jmspy hash-password). The password itself is never "
        "printed; an empty one is refused.")
    hashing.add_argument("--iterations", type=at_least(1), default=None, metavar="N",
                         help="PBKDF2 rounds (default: the broker's DEFAULT_ITERATIONS; "
                         "more is slower to check and to guess)")
    hashing.set_defaults(func=hash_password_command)


def hash_password_command(args: argparse.Namespace, stdin: TextIO | None = None) -> int:
    """Read a password (no echo on a terminal; one line from a pipe) and print its hash
    for a ``password-hash`` key. The password is never printed."""
    security: Any = importlib.import_module("jmspy.broker_ref.core.security")
    stream = stdin if stdin is not None else sys.stdin
    if stream.isatty():
        plain = getpass.getpass("password: ")
        if getpass.getpass("again: ") != plain:
            print("the passwords differ; nothing printed", file=sys.stderr)
            return 1
    else:
        plain = stream.readline().rstrip("\r\n")
    if not plain:
        print("empty password; nothing printed", file=sys.stderr)
        return 1
    iterations = args.iterations or security.DEFAULT_ITERATIONS
    print(security.hash_password(plain, iterations=iterations))
    return 0
