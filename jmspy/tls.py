"""TLS for the client transports: the schemes, the options and the context of one connect.

``stomp+ssl://`` (alias ``stomps://``) and ``mqtts://`` (alias ``mqtt+ssl://``) are the
``stomp://`` and ``mqtt://`` transports over TLS. Verification is on unless switched off
by name: the server's certificate must chain to the system's CAs (or to the CA the
options give) and name the host connected to (sent as SNI too).

Why one module: the factory properties (``sslCAFile``...), their URL query twins
(:data:`TLS_OPTIONS`) and the context built from them are shared by both transports, and
a checker of URL options reads :data:`TLS_OPTIONS` to know the query names TLS adds.

Why a context per connect (:meth:`TlsSettings.context`): a certificate renewed on disk
must be read again when the client reconnects, so nothing read from a file is kept.
The failures of a handshake are explained by :mod:`jmspy.tls_errors`.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidConfigurationException
from .logs import client_logger
from .url_options import UrlOption, flag

__all__ = [
    "TLS_OPTIONS",
    "TLS_PROPERTIES",
    "TLS_SCHEMES",
    "TLS_URL_OPTIONS",
    "TlsSettings",
    "check_addresses",
    "context_problem",
    "is_tls_scheme",
    "path_problem",
    "scheme_family",
]

log = client_logger("tls")

#: Each TLS scheme -> the transport (scheme family) it runs over TLS.
TLS_SCHEMES: Mapping[str, str] = {
    "stomp+ssl": "stomp", "stomps": "stomp", "mqtts": "mqtt", "mqtt+ssl": "mqtt",
}

#: URL query option -> the factory property it stands for on that address (a TLS
#: scheme's URL only). These are every query name TLS adds to ``stomp+ssl://``,
#: ``stomps://``, ``mqtts://`` and ``mqtt+ssl://``.
TLS_OPTIONS: Mapping[str, str] = {
    "ca_file": "sslCAFile",
    "ca_path": "sslCAPath",
    "cert_file": "sslCertFile",
    "key_file": "sslKeyFile",
    "key_password": "sslKeyPassword",
    "verify": "sslVerify",
}


def _given(name: str, prop: str, accepts: str, meaning: str) -> UrlOption:
    """A TLS query option whose value is taken as given (a path, a password): checked
    when the address's settings are resolved (TlsSettings.check names a missing file)."""
    return UrlOption(name, None, meaning, f"(the {prop} property)", accepts,
                     lambda raw: raw or None, "given.pem")


#: :data:`TLS_OPTIONS` as the URL option tables take them (jmspy/url_options.py): the
#: rows a TLS scheme's table adds to its plain scheme's (``OptionTable.plus``).
TLS_URL_OPTIONS: tuple[UrlOption, ...] = (
    _given("ca_file", "sslCAFile", "a PEM file", "the CA certificates to trust, instead of "
           "the system's"),
    _given("ca_path", "sslCAPath", "a directory", "a directory of CA certificates "
           "(OpenSSL's hashed layout; mqtts:// only)"),
    _given("cert_file", "sslCertFile", "a PEM file", "this client's certificate (mutual "
           "TLS)"),
    _given("key_file", "sslKeyFile", "a PEM file", "the private key of that certificate"),
    _given("key_password", "sslKeyPassword", "the password", "the key's password (prefer "
           "the property: URLs end up in logs)"),
    flag("verify", True, "check the broker's certificate and host name (false: the loud "
         "opt-out, warned at every connect)"),
)

#: The factory properties of TLS and their defaults (jmspy.properties declares them).
TLS_PROPERTIES: Mapping[str, Any] = {
    "sslCAFile": None, "sslCAPath": None, "sslCertFile": None, "sslKeyFile": None,
    "sslKeyPassword": None, "sslVerify": True, "sslContext": None,
}

_TRUE, _FALSE = ("true", "1"), ("false", "0")


def scheme_family(scheme: str) -> str:
    """The transport a scheme runs on: ``stomp`` for stomp, stomp+ssl and stomps."""
    low = scheme.lower()
    return TLS_SCHEMES.get(low, low)


def is_tls_scheme(scheme: str) -> bool:
    return scheme.lower() in TLS_SCHEMES


def path_problem(path: str, *, directory: bool = False) -> str | None:
    """Why ``path`` cannot be read as a file (a directory with ``directory``), or None."""
    if not isinstance(path, str) or not path:
        return "give the path of a file"
    if directory:
        if not os.path.isdir(path):
            return f"no such directory: {path!r}; give a directory of CA certificates " \
                   "(hashed names, as `openssl rehash` makes them)"
        return None
    if not os.path.exists(path):
        return f"no such file: {path!r}"
    if not os.path.isfile(path):
        return f"{path!r} is not a file"
    if not os.access(path, os.R_OK):
        return f"{path!r} is not readable by this process"
    return None


def context_problem(value: Any) -> str | None:
    """The property table's check of ``sslContext``."""
    if not isinstance(value, ssl.SSLContext):
        return f"give an ssl.SSLContext, not a {type(value).__name__}"
    if value.protocol == ssl.PROTOCOL_TLS_SERVER:
        return "this is a server context (PROTOCOL_TLS_SERVER); make one with " \
               "ssl.create_default_context() or ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)"
    return None


def _no_password() -> str:
    """The password of a key given none: the empty one (an encrypted key then fails to
    load, and the error says sslKeyPassword is missing)."""
    return ""


def _bool_option(raw: str, name: str) -> bool:
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise InvalidConfigurationException(
        f"?{name}={raw!r}: use true or false (also 1 or 0)")


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The TLS options of one address: the factory's properties, overridden by the
    address's URL query options (:data:`TLS_OPTIONS`)."""

    ca_file: str | None = None
    ca_path: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = field(default=None, repr=False)
    verify: bool = True
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def resolve(cls, scheme: str, query: Mapping[str, str],
                properties: Mapping[str, Any]) -> TlsSettings | None:
        """The settings of an address of ``scheme`` (None: not a TLS scheme). A TLS query
        option on a plain scheme is refused: it would be ignored while the connection
        went out in plain text."""
        given = [name for name in TLS_OPTIONS if name in query]
        if not is_tls_scheme(scheme):
            if given:
                tls = {"stomp": "stomp+ssl", "mqtt": "mqtts"}.get(scheme.lower(), scheme)
                raise InvalidConfigurationException(
                    f"?{given[0]}= is a TLS option but {scheme}:// connects in plain "
                    f"text; use {tls}:// for TLS")
            return None
        values = {prop: properties.get(prop, default)
                  for prop, default in TLS_PROPERTIES.items()}
        for name, prop in TLS_OPTIONS.items():
            if name in query:
                raw = query[name]
                values[prop] = _bool_option(raw, name) if name == "verify" else raw
        settings = cls(
            ca_file=values["sslCAFile"], ca_path=values["sslCAPath"],
            cert_file=values["sslCertFile"], key_file=values["sslKeyFile"],
            key_password=values["sslKeyPassword"], verify=bool(values["sslVerify"]),
            ssl_context=values["sslContext"])
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse what cannot work or is ambiguous, naming the option and the fix."""
        if self.ssl_context is not None:
            files = [name for name, value in (
                ("sslCAFile", self.ca_file), ("sslCAPath", self.ca_path),
                ("sslCertFile", self.cert_file), ("sslKeyFile", self.key_file),
                ("sslKeyPassword", self.key_password)) if value is not None]
            if files or not self.verify:
                what = ", ".join(files) if files else "sslVerify=false"
                raise InvalidConfigurationException(
                    f"sslContext and {what} are both given: a ready context already says "
                    "which CAs, certificate and checks to use; give one or the other")
            problem = context_problem(self.ssl_context)
            if problem:
                raise InvalidConfigurationException(f"sslContext: {problem}")
            return
        if self.key_file is not None and self.cert_file is None:
            raise InvalidConfigurationException(
                "sslKeyFile is given without sslCertFile: give the client certificate "
                "(sslCertFile) that goes with the key")
        if self.key_password is not None and self.cert_file is None:
            raise InvalidConfigurationException(
                "sslKeyPassword is given without sslCertFile: the password unlocks the "
                "client certificate's key; give sslCertFile (and sslKeyFile)")
        self.check_files()

    def check_files(self) -> None:
        """Every file named exists and is readable (run again at each connect)."""
        for prop, path, directory in (
                ("sslCAFile", self.ca_file, False), ("sslCAPath", self.ca_path, True),
                ("sslCertFile", self.cert_file, False), ("sslKeyFile", self.key_file, False)):
            if path is not None:
                problem = path_problem(path, directory=directory)
                if problem:
                    raise InvalidConfigurationException(f"{prop}: {problem}")

    @property
    def verifies(self) -> bool:
        """The server's certificate and host name are checked."""
        ctx = self.ssl_context
        if ctx is not None:
            return ctx.verify_mode != ssl.CERT_NONE and ctx.check_hostname
        return self.verify

    def warn_unverified(self, where: str) -> None:
        """The loud side of the opt-out: a WARNING at every connect that checks nothing."""
        if not self.verifies:
            log.warning(
                "TLS to %s does NOT verify the server's certificate (sslVerify=false or a "
                "context without checks): anyone on the network path can pose as the "
                "broker and read or change every message; give the broker's CA "
                "(sslCAFile) instead", where)

    def context(self, where: str, *, warn: bool = True) -> ssl.SSLContext:
        """A context for one connect to ``where`` ("host:port"), its files read now (a
        renewed certificate is picked up at the next reconnect). An unverified one logs
        a WARNING every time (``warn``: not for a diagnostic probe), naming the risk."""
        if warn:
            self.warn_unverified(where)
        if self.ssl_context is not None:
            return self.ssl_context
        self.check_files()
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file, capath=self.ca_path)
        except ssl.SSLError as exc:
            raise InvalidConfigurationException(
                f"the CA certificates for {where} cannot be loaded from "
                f"{self.ca_file or self.ca_path!r} ({exc.reason or exc}): give PEM "
                "certificates (sslCAFile) or a hashed directory of them (sslCAPath)"
            ) from exc
        if self.cert_file is not None:
            try:
                # never None: OpenSSL would then ask for an encrypted key's password on
                # the terminal, and a service would wait there for ever
                ctx.load_cert_chain(self.cert_file, self.key_file,
                                    self.key_password if self.key_password is not None
                                    else _no_password)
            except ssl.SSLError as exc:
                key = self.key_file or self.cert_file
                hint = ("the key is encrypted: give its password as sslKeyPassword"
                        if self.key_password is None else
                        "check that sslKeyPassword is the key's password and that the key "
                        "belongs to the certificate")
                raise InvalidConfigurationException(
                    f"the client certificate {self.cert_file!r} and key {key!r} for "
                    f"{where} cannot be loaded ({exc.reason or exc}): {hint}") from exc
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ctx.sslsocket_class = _ClosingSSLSocket
        return ctx


class _ClosingSSLSocket(ssl.SSLSocket):
    """An SSLSocket that closes itself when its handshake fails. paho wraps without the
    handshake and runs it itself; when that raises, paho drops the socket unclosed (a
    ResourceWarning and an open descriptor until the collector runs)."""

    def do_handshake(self, block: bool = False) -> None:
        try:
            super().do_handshake(block)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise  # a non-blocking handshake under way, not a failure
        except OSError:
            self.close()
            raise


def check_addresses(schemes: list[str], properties: Mapping[str, Any]) -> None:
    """Refuse TLS factory properties on a connection none of whose addresses uses TLS:
    the connection would go out in plain text with the CA or certificate ignored."""
    if any(is_tls_scheme(scheme) for scheme in schemes):
        return
    for prop, default in TLS_PROPERTIES.items():
        if properties.get(prop, default) != default:
            family = scheme_family(schemes[0]) if schemes else ""
            tls = {"stomp": "stomp+ssl://", "mqtt": "mqtts://"}.get(
                family, "stomp+ssl:// or mqtts://")
            raise InvalidConfigurationException(
                f"{prop} is set but no address uses TLS ({', '.join(sorted(set(schemes)))}"
                f"://): the connection would be plain text; use {tls} URLs")
