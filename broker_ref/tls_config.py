"""The ``[broker.tls]`` table of a broker config file, and the server ``SSLContext`` it makes.

::

    [broker.tls]
    port = 61614                   # the TLS listener (0: any free port)
    cert = "server.pem"            # PEM certificate (chain) the broker presents
    key = "server.key"             # its PEM private key
    key-password-file = "key.pw"   # when the key is encrypted (or key-password = "...")
    ca = "ca.pem"                  # CA file (or directory) that client certificates chain to
    require-client-cert = false    # true: a client without a valid certificate is refused
    min-version = "TLSv1.2"        # or "TLSv1.3"
    ciphers = "ECDHE+AESGCM"       # OpenSSL cipher string (TLS 1.2 and older only)
    identity-as-user = false       # true: a client certificate logs its subject in as a user
    user-from-cert = "CN"          # the subject field that names the user
    only = false                   # true: no plain-text listener, TLS only

Relative paths are read from the config file's directory, so a config and its
certificates move together. Parsing checks types, values and combinations; the files
themselves are read when the broker starts (:func:`server_context`), and each failure
there names the file, the key and what to do -- a broker with a broken certificate must
not start, and must not answer with a traceback either.
"""

from __future__ import annotations

import difflib
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .config_error import ConfigError

__all__ = ["CERT_FIELDS", "DEFAULT_TLS_PORT", "TlsConfig", "TlsConfigError", "cert_user",
           "parse_tls", "server_context"]

#: RabbitMQ's STOMP TLS port (ActiveMQ's examples use 61612): the plain port plus one
DEFAULT_TLS_PORT: Final = 61614
_VERSIONS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: ``user-from-cert`` spellings -> the attribute name :meth:`ssl.SSLSocket.getpeercert`
#: uses in the subject
CERT_FIELDS: Final = {"CN": "commonName", "emailAddress": "emailAddress",
                      "UID": "userId", "OU": "organizationalUnitName",
                      "O": "organizationName", "serialNumber": "serialNumber"}
_KEYS: Final = ("port", "cert", "key", "key-password", "key-password-file", "ca",
                "require-client-cert", "min-version", "ciphers", "identity-as-user",
                "user-from-cert", "only")


class TlsConfigError(ConfigError, ValueError):
    """``[broker.tls]`` is wrong, or a file it names cannot be used."""


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """What the TLS listener needs; paths are already resolved against the config file."""

    cert: str
    key: str
    port: int = DEFAULT_TLS_PORT
    key_password: str | None = None
    key_password_file: str | None = None
    ca: str | None = None
    require_client_cert: bool = False
    min_version: str = "TLSv1.2"
    ciphers: str | None = None
    identity_as_user: bool = False
    user_from_cert: str = "CN"
    only: bool = False
    source: str = "<default>"


def _fail(source: str, key: str, problem: str) -> TlsConfigError:
    return TlsConfigError(f"{source}: [broker.tls] {key}: {problem}")


def parse_tls(table: Mapping[str, Any], source: str, *, has_security: bool) -> TlsConfig:
    """Check ``[broker.tls]`` (``source`` names the file); the files are not read yet."""
    for key in table:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), _KEYS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise _fail(source, str(key), f"unknown key; {hint}valid keys: {', '.join(_KEYS)}")
    base = Path(source).parent if Path(source).is_file() else None

    def text(key: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise _fail(source, key, f"expected a non-empty string, got {value!r}")
        return value

    def path(key: str) -> str | None:
        value = text(key)
        if value is None or base is None or Path(value).is_absolute():
            return value
        return str(base / value)

    def flag(key: str) -> bool:
        value = table.get(key, False)
        if not isinstance(value, bool):
            raise _fail(source, key, f"expected true or false, got {value!r}")
        return value

    cert, key_file = path("cert"), path("key")
    if cert is None or key_file is None:
        missing = "cert" if cert is None else "key"
        raise _fail(source, missing, "missing: a TLS listener needs cert (the PEM certificate "
                    "the broker presents) and key (its private key)")
    port = table.get("port", DEFAULT_TLS_PORT)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise _fail(source, "port", f"{port!r} must be an integer from 0 (any free port) to "
                    "65535")
    if "key-password" in table and "key-password-file" in table:
        raise _fail(source, "key-password", "give key-password or key-password-file, not both")
    version = text("min-version") or "TLSv1.2"
    if version not in _VERSIONS:
        raise _fail(source, "min-version", f"{version!r} must be one of "
                    f"{', '.join(map(repr, _VERSIONS))}")
    ciphers = text("ciphers")
    if ciphers is not None:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(ciphers)
        except ssl.SSLError:
            raise _fail(source, "ciphers", f"{ciphers!r} selects no cipher; write an OpenSSL "
                        "cipher string, e.g. \"ECDHE+AESGCM:ECDHE+CHACHA20\"") from None
    field = text("user-from-cert") or "CN"
    if field not in CERT_FIELDS:
        raise _fail(source, "user-from-cert", f"{field!r} is not a subject field this broker "
                    f"reads; use one of {', '.join(CERT_FIELDS)}")
    config = TlsConfig(
        cert=cert, key=key_file, port=port, key_password=text("key-password"),
        key_password_file=path("key-password-file"), ca=path("ca"),
        require_client_cert=flag("require-client-cert"), min_version=version,
        ciphers=ciphers, identity_as_user=flag("identity-as-user"), user_from_cert=field,
        only=flag("only"), source=source)
    for needs_ca in ("require-client-cert", "identity-as-user"):
        if flag(needs_ca) and config.ca is None:
            raise _fail(source, needs_ca, "client certificates are checked against ca: set "
                        "ca to the CA certificate that signs them")
    if config.identity_as_user and not has_security:
        raise _fail(source, "identity-as-user", "certificate users are users of [security]: "
                    "add a [security] table whose [security.users.NAME] and permissions "
                    "give them their roles")
    return config


def _read_password(tls: TlsConfig) -> str | None:
    if tls.key_password_file is None:
        return tls.key_password
    try:
        return Path(tls.key_password_file).read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise _fail(tls.source, "key-password-file", f"cannot read {tls.key_password_file}: "
                    f"{exc.strerror}; make it a file holding the key's password") from None


def _check_pem(tls: TlsConfig, key: str, file: str, marker: str, what: str) -> bytes:
    try:
        data = Path(file).read_bytes()
    except OSError as exc:
        raise _fail(tls.source, key, f"cannot read {file}: {exc.strerror}; point {key} at "
                    f"{what}") from None
    if marker.encode() not in data:
        raise _fail(tls.source, key, f"{file} holds no PEM {marker.strip('-').lower()} "
                    f"section; point {key} at {what}")
    return data


def server_context(tls: TlsConfig) -> ssl.SSLContext:
    """The listener's context, every file read now: a :class:`TlsConfigError` naming the
    file and the fix when one is missing, unreadable, not PEM, not the certificate's
    key, or encrypted with another password."""
    _check_pem(tls, "cert", tls.cert, "-----BEGIN CERTIFICATE-----",
               "the PEM certificate (chain) the broker presents")
    key_pem = _check_pem(tls, "key", tls.key, "PRIVATE KEY-----",
                         "the certificate's PEM private key")
    encrypted = b"ENCRYPTED" in key_pem
    password = _read_password(tls)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[tls.min_version]
    if tls.ciphers is not None:
        context.set_ciphers(tls.ciphers)
    # a callable, never None: with None OpenSSL would prompt on the terminal for the
    # password of an encrypted key
    secret: Callable[[], bytes] = lambda: (password or "").encode()  # noqa: E731
    try:
        context.load_cert_chain(tls.cert, tls.key, password=secret)
    except ssl.SSLError as exc:
        reason = str(exc.reason or exc)
        if "MISMATCH" in reason:
            raise _fail(tls.source, "key", f"{tls.key} is not the private key of {tls.cert} "
                        f"({reason}); give the key the certificate was made for") from None
        if encrypted and "MISMATCH" not in reason:  # OpenSSL says only "PEM lib" then
            fix = ("is wrong: correct key-password-file (or key-password)" if password
                   else "is missing: set key-password-file (or key-password)")
            raise _fail(tls.source, "key", f"{tls.key} is encrypted and its password "
                        f"{fix}") from None
        raise _fail(tls.source, "key", f"cannot load {tls.cert} with {tls.key}: {reason}; "
                    "check both are PEM and belong together") from None
    if tls.ca is not None:
        is_dir = Path(tls.ca).is_dir()
        try:
            context.load_verify_locations(cafile=None if is_dir else tls.ca,
                                          capath=tls.ca if is_dir else None)
        except (OSError, ssl.SSLError) as exc:
            why = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
            raise _fail(tls.source, "ca", f"cannot load CA certificates from {tls.ca}: "
                        f"{why}; point ca at a PEM file (or directory) of CA "
                        "certificates") from None
        context.verify_mode = (ssl.CERT_REQUIRED if tls.require_client_cert
                               else ssl.CERT_OPTIONAL)
    return context


def cert_user(peercert: object, field: str) -> str | None:
    """The user a verified client certificate names in its subject ``field`` (a
    :data:`CERT_FIELDS` key), or None when it has none (or no certificate was given)."""
    if not isinstance(peercert, dict):
        return None
    wanted = CERT_FIELDS[field]
    for rdn in peercert.get("subject", ()):
        for name, value in rdn:
            if name == wanted and value:
                return str(value)
    return None
