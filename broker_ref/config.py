"""TOML configuration of ``jmspy broker`` (read with :mod:`tomllib`).

::

    [broker]
    host = "127.0.0.1"      # listen address
    port = 61613
    name = "jmspy"
    loop = "uvloop"         # the default when uvloop is installed (it is a dependency on
                            # CPython off Windows), else "asyncio"; "asyncio" forces it
    idle-spin-us = 100      # after a read the loop polls this long before it sleeps,
                            # adaptively (jmspy/idle_spin.py); 0 = off, at most 1000

    [broker.http]           # /metrics and the management API (jmspy[http])
    host = "127.0.0.1"      # loopback unless opened up on purpose
    port = 8161             # what --metrics-port sets; 0 = any free port
    metrics-auth = true     # with [security]: /metrics needs credentials too

    [broker.mqtt]           # MQTT 3.1.1 and 5 beside STOMP (docs/mqtt.md)
    port = 1883             # listen port (0: any free one); unset: no MQTT listener
    max-packet-bytes = 1048576  # largest packet a client may send
    max-keep-alive = 0      # longest keep-alive a client may ask, s (0: any)
    tls-port = 8883         # MQTT over TLS with [broker.tls]'s certificate; unset: none

    [broker.tls]            # a TLS listener beside (or, only = true, instead of) the
                            # plain one: broker_ref/tls_config.py lists its keys

    [limits]
    max-frame-bytes = 10485760   # largest frame body (10 MiB)
    input-budget = "64 MB"       # bytes of frames being read, all connections together;
                                 # when spent, connections holding part of a frame pause
    max-headers = 1000           # most headers in one frame
    max-header-bytes = 65536     # largest header section
    max-destination-length = 1024  # longest destination or subscription name, in bytes
    heartbeat-ms = 10000         # heart-beat the server offers/asks (0 = none)
    connect-timeout = 10         # seconds a connection has to complete CONNECT (0 = none)
    max-connections = 1000       # connections served at once (0 = no cap)
    max-connections-per-address = 100  # from one source address, loopback included
                                 # (0 = no cap; unset: a tenth of max-connections)
    idle-timeout = 60            # seconds a client without heart-beats may send and be
                                 # sent nothing before it is closed with an ERROR (0 = never)
    login-window-ms = 60000      # failed logins counted over this window...
    login-delay-after = 3        # ...from this many on, each attempt waits login-delay-ms
    login-delay-ms = 1000
    login-refuse-after = 10      # ...from this many on, attempts are refused unchecked
                                 # (all three per source address and user name)
    login-address-refuse-after = 30  # failed logins from one address across user names
                                 # after which that address is refused for every user

    [system-usage]                   # ActiveMQ's names and defaults (sizes: "64 MB", bytes)
    memory-limit = "64 MB"           # RAM for pending messages; past 70 % backlogs page out,
                                     # at 100 % producers wait (producer flow control)
    destination-memory-percent = 10  # each destination's default share of memory-limit
                                     # (its own memory-limit in address settings wins)
    store-limit = "100 GB"           # persistent sends wait once the store holds this much
    temp-limit = "10 GB"             # spooled (non-persistent) backlogs; then sends wait
    send-fail-if-no-space = false    # true: a send that would wait fails at once instead
    send-fail-if-no-space-after-timeout = 0  # ms; > 0: it fails after waiting this long

    [address-settings."orders.#"]   # wildcard patterns: '.' words, '*' one, '#'/'>' rest
    consumer-flow-limit = 100       # kebab-case names of AddressSettings fields
    memory-limit = "10 MB"          # sizes as above; producer-flow-control = true,
                                    # pending-message-limit = N (slow topic subscribers)

    [security]                       # handed to broker_ref.security_config.parse_security

Address-settings keys are derived from :class:`AddressSettings` with
:func:`dataclasses.fields`, so a field added to the core is configurable at once. Every
mistake raises :class:`ConfigError` naming the key, the table and the file, and saying
what would be valid: a broker that starts with a silently ignored setting is worse than
one that refuses to start.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import logging
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jmspy.errors import InvalidConfigurationException
from jmspy.idle_spin import DEFAULT_IDLE_SPIN_US, MAX_IDLE_SPIN_US

from .config_error import ConfigError
from .core.api import AddressSettings
from .core.broker import (
    DEFAULT_MAX_DESTINATION_LENGTH,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_STORE_LIMIT,
    DEFAULT_TEMP_LIMIT,
)
from .core.input_budget import DEFAULT_INPUT_BUDGET, DEFAULT_MAX_FRAME_BYTES
from .core.queue_limits import DEFAULT_DESTINATION_MEMORY_PERCENT

__all__ = [
    "DEFAULT_CONFIG",
    "EVENT_LOOPS",
    "BrokerConfig",
    "ConfigError",
    "check_idle_spin",
    "check_ports",
    "default_loop",
    "load_config",
    "parse_config",
    "parse_size",
    "warn_readable_passwords",
]

#: Event loops ``jmspy broker`` can run on: the standard library's, or uvloop (libuv),
#: an optional dependency that costs less per socket read and write, which is most of
#: the broker's time when consumers ACK one message at a time.
EVENT_LOOPS = ("asyncio", "uvloop")


def default_loop() -> str:
    """``"uvloop"`` when it imports, else ``"asyncio"``: the loop a config that names none
    runs on.

    uvloop is installed with jmspy wherever it has wheels (CPython off Windows), so the fast
    loop is what a user gets without asking; where it is missing (PyPy, Windows) the
    broker still starts, on asyncio. The import is tried rather than looked up, so an
    installed but broken uvloop falls back here instead of failing at startup with a
    misleading "not installed".
    """
    try:
        importlib.import_module("uvloop")
    except ImportError:
        return "asyncio"
    return "uvloop"

#: Where ``jmspy broker`` keeps persistent messages unless told otherwise (relative to the
#: working directory): a broker that forgets what it acknowledged with a RECEIPT when it
#: restarts would break JMS's promise, so persistence is the default, as on ActiveMQ.
DEFAULT_DATA_DIR = "jmspy-data"

DEFAULT_CONFIG = """\
[broker]
host = "127.0.0.1"
port = 61613
name = "jmspy"

[limits]
heartbeat-ms = 10000
"""


@dataclass(slots=True)
class BrokerConfig:
    """Everything ``jmspy broker`` needs: where to listen, codec limits, broker kwargs."""

    host: str = "127.0.0.1"
    port: int = 61613
    name: str = "jmspy"
    #: one of EVENT_LOOPS; unset in the file: uvloop if installed (:func:`default_loop`)
    loop: str = field(default_factory=default_loop)
    #: where persistent messages are kept (None: in memory, lost when the broker stops)
    data_dir: str | None = DEFAULT_DATA_DIR
    #: microseconds the loop polls after a read before it sleeps (0: off)
    idle_spin_us: int = DEFAULT_IDLE_SPIN_US
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_headers: int = 1000
    max_header_bytes: int = 64 * 1024
    max_destination_length: int = DEFAULT_MAX_DESTINATION_LENGTH
    heartbeat_ms: int = 10_000
    connect_timeout: int = 10
    max_connections: int = 1000
    #: None: a tenth of max_connections (ConnectionLimits.per_address_cap)
    max_connections_per_address: int | None = None
    idle_timeout: int = 60
    input_budget: int = DEFAULT_INPUT_BUDGET
    login_window_ms: int = 60_000
    login_delay_after: int = 3
    login_delay_ms: int = 1_000
    login_refuse_after: int = 10
    login_address_refuse_after: int = 30
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    store_limit: int = DEFAULT_STORE_LIMIT
    temp_limit: int = DEFAULT_TEMP_LIMIT
    send_fail_if_no_space: bool = False
    send_fail_if_no_space_after_timeout: int = 0
    destination_memory_percent: int = DEFAULT_DESTINATION_MEMORY_PERCENT
    settings: dict[str, AddressSettings] = field(default_factory=dict)
    security: Any = None
    #: the TLS listener's :class:`~.tls_config.TlsConfig` ([broker.tls]); None: none
    tls: Any = None
    #: the MQTT listener's port ([broker.mqtt] port, ``--mqtt-port``); None: no MQTT
    mqtt_port: int | None = None
    #: the largest packet an MQTT client may send ([broker.mqtt] max-packet-bytes)
    mqtt_max_packet_bytes: int = 1024 * 1024
    #: [broker.mqtt] max-keep-alive: the longest keep-alive a client may ask (s; 0: any)
    mqtt_max_keep_alive: int = 0
    #: [broker.mqtt] tls-port: MQTT over TLS with [broker.tls]'s certificate (None: none)
    mqtt_tls_port: int | None = None
    #: where ``/metrics`` is served (``--metrics-port``, on ``host``); None: not served
    metrics_port: int | None = None
    #: the HTTP listener's address ([broker.http] host): loopback unless opened up
    http_host: str = "127.0.0.1"
    #: with security on, /metrics asks for credentials too ([broker.http] metrics-auth)
    metrics_auth: bool = True
    source: str = "<default>"

    def broker_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~jmspy.broker_ref.core.Broker`."""
        kwargs: dict[str, Any] = {
            "name": self.name,
            "settings": dict(self.settings),
            "max_destination_length": self.max_destination_length,
            "memory_limit": self.memory_limit,
            "store_limit": self.store_limit,
            "temp_limit": self.temp_limit,
            "send_fail_if_no_space": self.send_fail_if_no_space,
            "send_fail_if_no_space_after_timeout": self.send_fail_if_no_space_after_timeout,
            "destination_memory_percent": self.destination_memory_percent,
        }
        if self.security is not None:
            kwargs["security"] = self.security
        return kwargs


_TOP = {"broker", "limits", "system-usage", "address-settings", "security"}
#: [system-usage] key -> (BrokerConfig attribute, type); the sizes go through parse_size
_SYSTEM_USAGE: dict[str, tuple[str, type]] = {
    "memory-limit": ("memory_limit", int),
    "store-limit": ("store_limit", int),
    "temp-limit": ("temp_limit", int),
    "send-fail-if-no-space": ("send_fail_if_no_space", bool),
    "send-fail-if-no-space-after-timeout": ("send_fail_if_no_space_after_timeout", float),
    "destination-memory-percent": ("destination_memory_percent", int),
}
_SIZE_KEYS = frozenset({"memory-limit", "store-limit", "temp-limit"})
#: [limits] keys that are sizes (bytes, or "64 MB")
_LIMIT_SIZES = frozenset({"input-budget"})
#: address settings that are sizes (written like the [system-usage] ones)
_SIZE_SETTINGS = frozenset({"memory_limit"})
_UNITS = {"": 1, "B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def parse_size(value: object, what: str) -> int:
    """A size as ActiveMQ's configuration writes it: bytes (an int or "4096"), or a number
    and a unit ("64 MB", "512 KB", "1.5 GB"; units are powers of 1024). ``what`` names the
    key and file in the error."""
    if isinstance(value, int) and not isinstance(value, bool):
        number, unit = float(value), ""
    elif isinstance(value, str):
        text = value.strip().upper().replace(" ", "")
        digits = text.rstrip("KMGTB")
        number_text, unit = digits, text[len(digits):]
        try:
            number = float(number_text)
        except ValueError:
            number, unit = -1.0, "?"
    else:
        number, unit = -1.0, "?"
    if unit not in _UNITS or number < 0:
        raise ConfigError(f"{what} = {value!r} is not a size; write bytes (4096) or a number "
                          "and a unit: \"512 KB\", \"64 MB\", \"100 GB\"")
    return int(number * _UNITS[unit])
_BROKER = {"host": str, "port": int, "name": str, "loop": str, "data-dir": str,
           "idle-spin-us": int}
_LIMITS = {
    "max-frame-bytes": "max_frame_bytes",
    "max-headers": "max_headers",
    "max-header-bytes": "max_header_bytes",
    "max-destination-length": "max_destination_length",
    "heartbeat-ms": "heartbeat_ms",
    "connect-timeout": "connect_timeout",
    "max-connections": "max_connections",
    "max-connections-per-address": "max_connections_per_address",
    "idle-timeout": "idle_timeout",
    "input-budget": "input_budget",
    "login-window-ms": "login_window_ms",
    "login-delay-after": "login_delay_after",
    "login-delay-ms": "login_delay_ms",
    "login-refuse-after": "login_refuse_after",
    "login-address-refuse-after": "login_address_refuse_after",
}


def _unknown(key: str, table: str, source: str, valid: typing.Iterable[str]) -> ConfigError:
    return ConfigError(
        f"{source}: unknown key {key!r} in [{table}]; valid keys are: "
        f"{', '.join(sorted(valid))}"
    )


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _convert(value: Any, tp: Any, key: str, table: str, source: str) -> Any:
    """Check ``value`` against the annotation ``tp`` (int, str, bool, float, enums,
    optionals, lists) and convert where TOML cannot spell the type (enums)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        errors: list[str] = []
        for arg in args:
            try:
                return _convert(value, arg, key, table, source)
            except ConfigError as exc:
                errors.append(str(exc))
        expected = " or ".join(_type_name(a) for a in args)
        raise ConfigError(
            f"{source}: [{table}] {key} = {value!r} has the wrong type; expected {expected}"
        )
    ok: bool
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in tp)
            raise ConfigError(
                f"{source}: [{table}] {key} = {value!r} is not valid; expected one of {choices}"
            ) from None
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif origin in (list, tuple, set, frozenset):
        ok = isinstance(value, list)
        if ok:
            (inner, *_) = typing.get_args(tp) or (Any,)
            items = [value if inner is Any else _convert(v, inner, key, table, source)
                     for v in value]
            return origin(items)
    elif tp is Any:
        ok = True
    elif isinstance(tp, type):
        ok = isinstance(value, tp)
    else:
        ok = True
    if not ok:
        raise ConfigError(
            f"{source}: [{table}] {key} = {value!r} has the wrong type; expected "
            f"{_type_name(tp)}"
        )
    return value


def _address_settings(pattern: str, table: Any, source: str) -> AddressSettings:
    name = f'address-settings."{pattern}"'
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [{name}] must be a table of settings")
    hints = typing.get_type_hints(AddressSettings)
    by_key = {f.name.replace("_", "-"): f.name for f in dataclasses.fields(AddressSettings)}
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        attr = by_key.get(key)
        if attr is None:
            raise _unknown(key, name, source, by_key)
        if attr in _SIZE_SETTINGS:
            kwargs[attr] = parse_size(value, f"{source}: [{name}] {key}")
        else:
            kwargs[attr] = _convert(value, hints[attr], key, name, source)
    try:
        return AddressSettings(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: [{name}] is invalid: {exc}") from exc


def parse_config(data: dict[str, Any], source: str) -> BrokerConfig:
    """Validate a parsed TOML document (``source`` names it in error messages)."""
    cfg = BrokerConfig(source=source)
    for key in data:
        if key not in _TOP:
            raise ConfigError(
                f"{source}: unknown table [{key}]; valid tables are: {', '.join(sorted(_TOP))}"
            )
    for key, value in _table(data, "broker", source).items():
        if key == "tls":
            cfg.tls = _tls(value, source, has_security="security" in data)
            continue
        if key == "http":
            _http(cfg, value, source)
            continue
        if key == "mqtt":
            _mqtt(cfg, value, source)
            continue
        tp = _BROKER.get(key)
        if tp is None:
            raise _unknown(key, "broker", source, [*_BROKER, "tls", "http", "mqtt"])
        setattr(cfg, key.replace("-", "_"), _convert(value, tp, key, "broker", source))
    for key, value in _table(data, "limits", source).items():
        attr = _LIMITS.get(key)
        if attr is None:
            raise _unknown(key, "limits", source, _LIMITS)
        if key in _LIMIT_SIZES:
            setattr(cfg, attr, parse_size(value, f"{source}: [limits] {key}"))
            continue
        number = _convert(value, int, key, "limits", source)
        low = 1 if key == "max-destination-length" else 0
        if number < low:
            raise ConfigError(f"{source}: [limits] {key} = {number} must be >= {low}")
        setattr(cfg, attr, number)
    for key, value in _table(data, "system-usage", source).items():
        entry = _SYSTEM_USAGE.get(key)
        if entry is None:
            raise _unknown(key, "system-usage", source, _SYSTEM_USAGE)
        attr, tp = entry
        if key in _SIZE_KEYS:
            setattr(cfg, attr, parse_size(value, f"{source}: [system-usage] {key}"))
        elif tp is bool:
            setattr(cfg, attr, _convert(value, bool, key, "system-usage", source))
        elif tp is int:  # a percentage
            percent = _convert(value, int, key, "system-usage", source)
            if not 1 <= percent <= 100:
                raise ConfigError(f"{source}: [system-usage] {key} = {percent} must be from 1 "
                                  "to 100 (% of memory-limit each destination may hold unless "
                                  "its address settings set a memory-limit)")
            setattr(cfg, attr, percent)
        else:  # a time in ms
            ms = _convert(value, int, key, "system-usage", source)
            if ms < 0:
                raise ConfigError(f"{source}: [system-usage] {key} = {ms} must be >= 0 "
                                  "(milliseconds; 0 = wait as long as it takes)")
            setattr(cfg, attr, ms)
    if cfg.loop not in EVENT_LOOPS:
        raise ConfigError(f"{source}: [broker] loop = {cfg.loop!r} must be one of: "
                          f"{', '.join(EVENT_LOOPS)}")
    if not 0 <= cfg.port <= 65535:
        raise ConfigError(f"{source}: [broker] port = {cfg.port} must be between 0 and 65535")
    check_idle_spin(cfg, f"{source}: [broker] idle-spin-us")
    check_ports(cfg, f"{source}: [broker] port and [broker.tls] port")
    for pattern, table in _table(data, "address-settings", source).items():
        cfg.settings[pattern] = _address_settings(pattern, table, source)
    if "security" in data:
        cfg.security = _security(_table(data, "security", source), source)
    return cfg


def check_idle_spin(cfg: BrokerConfig, where: str) -> None:
    """Refuse a polling window out of range (``where`` names the key or the option)."""
    if not 0 <= cfg.idle_spin_us <= MAX_IDLE_SPIN_US:
        raise ConfigError(
            f"{where} = {cfg.idle_spin_us} must be between 0 (off) and {MAX_IDLE_SPIN_US} "
            f"microseconds (default {DEFAULT_IDLE_SPIN_US})")


def check_ports(cfg: BrokerConfig, where: str) -> None:
    """Refuse a plain and a TLS listener on one fixed port (``where`` names the keys or
    the options): the second could never bind."""
    tls = cfg.tls
    if tls is not None and not tls.only and tls.port == cfg.port != 0:
        raise ConfigError(f"{where} are both {cfg.port}: the plain and the TLS listener "
                          "need a port each; change one (or set [broker.tls] only = true "
                          "to serve TLS alone)")


#: [broker.http] key -> (BrokerConfig attribute, type)
_HTTP: dict[str, tuple[str, type]] = {
    "host": ("http_host", str), "port": ("metrics_port", int),
    "metrics-auth": ("metrics_auth", bool),
}


def _http(cfg: BrokerConfig, table: Any, source: str) -> None:
    """[broker.http]: where /metrics and the management API listen."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [broker] http must be a table ([broker.http])")
    for key, value in table.items():
        entry = _HTTP.get(key)
        if entry is None:
            raise _unknown(key, "broker.http", source, _HTTP)
        attr, tp = entry
        setattr(cfg, attr, _convert(value, tp, key, "broker.http", source))
    if cfg.metrics_port is not None and not 0 <= cfg.metrics_port <= 65535:
        raise ConfigError(f"{source}: [broker.http] port = {cfg.metrics_port} must be "
                          "between 0 (any free port) and 65535")


def _mqtt(cfg: BrokerConfig, table: Any, source: str) -> None:
    """``[broker.mqtt]``: ``port`` (the MQTT listener, on [broker] host) and
    ``max-packet-bytes`` (the largest packet a client may send) and ``max-keep-alive``
    (the longest keep-alive a client may ask, as Mosquitto's ``max_keepalive``)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [broker] mqtt must be a table ([broker.mqtt])")
    for key, value in table.items():
        if key not in ("port", "tls-port", "max-packet-bytes", "max-keep-alive"):
            raise _unknown(key, "broker.mqtt", source,
                           ["port", "tls-port", "max-packet-bytes", "max-keep-alive"])
        number = _convert(value, int, key, "broker.mqtt", source)
        if key == "tls-port":
            if not 0 <= number <= 65535:
                raise ConfigError(f"{source}: [broker.mqtt] tls-port = {number} must be "
                                  "between 0 (any free port) and 65535 (MQTT's is 8883)")
            cfg.mqtt_tls_port = number
        elif key == "max-keep-alive":
            if not 0 <= number <= 65535:
                raise ConfigError(f"{source}: [broker.mqtt] max-keep-alive = {number} must be "
                                  "between 0 (clients choose) and 65535 seconds")
            cfg.mqtt_max_keep_alive = number
        elif key == "port":
            if not 0 <= number <= 65535:
                raise ConfigError(f"{source}: [broker.mqtt] port = {number} must be between "
                                  "0 (any free port) and 65535 (MQTT's is 1883)")
            cfg.mqtt_port = number
        else:
            if not 16 <= number <= 268_435_455:
                raise ConfigError(f"{source}: [broker.mqtt] max-packet-bytes = {number} must "
                                  "be between 16 and 268435455 (MQTT's largest packet)")
            cfg.mqtt_max_packet_bytes = number


def _tls(table: Any, source: str, *, has_security: bool) -> Any:
    from .tls_config import parse_tls

    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [broker] tls must be a table ([broker.tls])")
    return parse_tls(table, source, has_security=has_security)


def _table(data: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {name} must be a table ([{name}])")
    return value


def _security(table: dict[str, Any], source: str) -> Any:
    """Imported lazily: only brokers configured with security need that module."""
    try:
        from .security_config import parse_security  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise ConfigError(
            f"{source}: a [security] table is present but this jmspy has no security "
            f"support (jmspy.broker_ref.security_config: {exc}); remove [security] or upgrade"
        ) from exc
    try:
        return parse_security(table, source)
    except ConfigError:
        raise
    except (ValueError, TypeError, KeyError, InvalidConfigurationException) as exc:
        raise ConfigError(f"{source}: [security] is invalid: {exc}") from exc


log = logging.getLogger("jmspy.broker.config")


def warn_readable_passwords(path: Path, data: dict[str, Any]) -> None:
    """Log a warning when the config file at ``path`` holds plaintext passwords
    (``[security.users.NAME] password``) and its group or everyone may read it: whoever
    can read the file can log in as those users. Hashes (``password-hash``) are fine to
    share: they cost an attacker the PBKDF2 rounds per guess. Not an error, since a
    broker on a one-user machine may keep its file as it likes."""
    security = data.get("security")
    users = security.get("users") if isinstance(security, dict) else None
    if not isinstance(users, dict) or os.name == "nt":  # no POSIX modes to read there
        return
    plain = sorted(name for name, entry in users.items()
                   if isinstance(entry, dict) and "password" in entry)
    if not plain:
        return
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return
    if not mode & 0o044:
        return
    who = "every user of this machine" if mode & 0o004 else "the members of its group"
    log.warning(
        "config file %s holds plaintext passwords (users: %s) and %s may read it (mode "
        "%04o), so they can log in as those users; run `chmod 600 %s`, or replace each "
        "password with a password-hash printed by `jmspy hash-password`",
        path, ", ".join(plain), who, mode, path)


def load_config(path: str | Path | None = None) -> BrokerConfig:
    """Read ``path`` (or the embedded default config when None); warns about a readable
    file holding plaintext passwords (:func:`warn_readable_passwords`)."""
    if path is None:
        return parse_config(tomllib.loads(DEFAULT_CONFIG), "<default config>")
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {source}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    config = parse_config(data, source)
    warn_readable_passwords(Path(path), data)
    return config
