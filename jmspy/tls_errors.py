"""What failed in a TLS connect, said as a :class:`TLSException` naming host:port, the
check that failed and what to do.

Why a module of its own: the libraries say too little. paho raises the ``ssl`` error of
the handshake (a bare ``SSLCertVerificationError`` traceback is no answer to "what do I
change?"); stomp.py logs it and raises ``ConnectFailedException`` with no text at all;
and in TLS 1.3 a server that refuses the client's certificate says so only after the
handshake, so both libraries see a connection that closed before the protocol's answer.
So :func:`explain` classifies an ``ssl`` error, and :func:`diagnose` -- called only
after a connect failed -- opens one more connection to find out: a handshake with the
same context (and a short read, for the alert that follows a refused certificate), or,
for a plain-text address, an unverified handshake that tells whether the port speaks
TLS. Each is bounded by the connect timeout; neither sends a byte of the protocol.
"""

from __future__ import annotations

import socket
import ssl

from .errors import JMSException

__all__ = ["TLSException", "diagnose", "explain"]

#: At most this long (or the connect timeout if shorter) the probe of a plain-text
#: address waits for a TLS server's hello: a TLS listener answers a hello at once, and a
#: silent server already cost the caller its connect timeout.
_HELLO_WAIT = 3.0

#: How long the probe waits, after its handshake, for the alert of a server that
#: refuses the client's certificate (TLS 1.3 sends it then): at most this, or the
#: connect timeout if shorter.
_ALERT_WAIT = 1.0

# OpenSSL's X509_V_ERR_* codes a user can do something about (x509_vfy.h).
_EXPIRED, _NOT_YET_VALID = 10, 9
_UNKNOWN_CA = (2, 18, 19, 20, 21)
_HOST_MISMATCH = (62, 64)
_CLIENT_CERT_ALERTS = ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA",
                       "CERTIFICATE_UNKNOWN", "ACCESS_DENIED", "HANDSHAKE_FAILURE",
                       "UNSUPPORTED_CERTIFICATE", "CERTIFICATE_EXPIRED")
_NOT_TLS = ("WRONG_VERSION_NUMBER", "UNEXPECTED_EOF", "RECORD_LAYER_FAILURE",
            "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST", "UNKNOWN_PROTOCOL",
            "RECORD_TOO_LARGE")


class TLSException(JMSException):
    """A TLS connect failed; ``check`` names the check ("unknown CA", "hostname",
    "expired", "client certificate", "not a TLS port", "plain text on a TLS port"...).

    Not a JMSSecurityException on purpose: another broker of an address list may have a
    good certificate, and a renewed one may be in place at the next reconnect."""

    error_code = "TLS_FAILED"

    def __init__(self, message: str, *, check: str) -> None:
        super().__init__(message)
        self.check = check


def explain(exc: BaseException, where: str, *, timeout: float) -> TLSException | None:
    """The TLSException for ``exc``, raised by a TLS connect to ``where``; None when it
    is not a TLS failure (a refused TCP connection, a DNS error)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return _verification(exc, where)
    if isinstance(exc, ssl.SSLError):
        reason = str(exc.reason or exc)
        if any(word in reason for word in _CLIENT_CERT_ALERTS):
            return TLSException(
                f"the TLS server at {where} refused this client's certificate "
                f"({reason}): the broker requires a client certificate its CA signed; "
                "give it as sslCertFile and sslKeyFile (?cert_file=&key_file=), or have "
                "the broker's administrator trust its CA", check="client certificate")
        if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError) or any(
                word in reason for word in _NOT_TLS):
            return _not_tls(where, reason)
        return TLSException(
            f"the TLS handshake with {where} failed ({reason}); check that the port is the "
            "broker's TLS listener and that both sides share a TLS version and cipher",
            check="handshake")
    if isinstance(exc, TimeoutError):
        return TLSException(
            f"no TLS handshake answer from {where} within the connect timeout ({timeout:g} "
            "s): the port accepted TCP but said nothing; it is probably a plain-text "
            "listener (use stomp:// or mqtt://) or another protocol's port",
            check="not a TLS port")
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return _not_tls(where, type(exc).__name__)
    return None


def _verification(exc: ssl.SSLCertVerificationError, where: str) -> TLSException:
    code = exc.verify_code
    text = exc.verify_message or str(exc)
    if code in (_EXPIRED, _NOT_YET_VALID):
        when = "has expired" if code == _EXPIRED else "is not valid yet"
        return TLSException(
            f"the TLS certificate of {where} {when} ({text}): the broker must renew its "
            "certificate (or this machine's clock is wrong); certificate check failed",
            check="expired")
    if code in _HOST_MISMATCH:
        return TLSException(
            f"the TLS certificate of {where} is not for this host ({text}): connect with "
            "a host name the certificate names (its subjectAltName), or have the broker "
            "use a certificate for this name", check="hostname")
    if code in _UNKNOWN_CA:
        return TLSException(
            f"the TLS certificate of {where} is signed by a CA this client does not "
            f"trust ({text}): give the CA that signed it as sslCAFile (?ca_file=PATH) or "
            "sslCAPath; without one the system's CAs are used", check="unknown CA")
    return TLSException(
        f"the TLS certificate of {where} failed verification ({text}); check the "
        "broker's certificate and the CA given as sslCAFile", check="certificate")


def _not_tls(where: str, reason: str) -> TLSException:
    return TLSException(
        f"the server at {where} closed or garbled the TLS handshake ({reason}): this is "
        "probably a plain-text port -- use stomp:// or mqtt:// for it, or the broker's "
        "TLS port -- or the broker refused this client during the handshake (a client "
        "certificate it requires: sslCertFile)", check="not a TLS port")


def diagnose(host: str, port: int, context: ssl.SSLContext | None, *,
             timeout: float, family: str = "stomp") -> TLSException | None:
    """After a connect to ``host:port`` failed without saying why: with ``context`` (a
    TLS address), the TLSException a handshake with it meets, if any; without (a
    plain-text address), a TLSException if the port turns out to speak TLS."""
    where = f"{host}:{port}"
    if context is None:
        return _plain_on_tls(host, port, timeout, family)
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return None  # no TCP connection at all: the transport's own message says so
    try:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            tls.settimeout(min(_ALERT_WAIT, timeout))
            try:
                data = tls.recv(1)  # a refused client certificate arrives as an alert now
            except (TimeoutError, ssl.SSLWantReadError):
                return None  # the handshake is fine: the failure was not TLS's
            if not data:
                return _closed_after_handshake(where)
    except OSError as exc:
        return explain(exc, where, timeout=timeout)
    finally:
        raw.close()
    return None


def _closed_after_handshake(where: str) -> TLSException:
    """The server closed the probe's connection right after the handshake, before
    either side sent a byte of the protocol, and without an alert: what a server that
    refuses the client's certificate does when it drops the connection without saying
    why (TLS 1.3 checks the client's certificate after the client's side of the
    handshake is done). A broker waits for the client's first frame otherwise."""
    return TLSException(
        f"the TLS server at {where} closed the connection right after the TLS handshake, "
        "before any protocol byte: it most likely requires a client certificate or "
        "refused this client's; give one its CA signed as sslCertFile and sslKeyFile "
        "(?cert_file=&key_file=), or have the broker's administrator trust its CA",
        check="client certificate")


def _plain_on_tls(host: str, port: int, timeout: float, family: str) -> TLSException | None:
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE  # only asks whether the port speaks TLS; sends nothing
    try:
        raw = socket.create_connection((host, port), timeout=min(timeout, _HELLO_WAIT))
    except OSError:
        return None
    try:
        with probe.wrap_socket(raw, server_hostname=host):
            pass
    except OSError:
        return None  # no TLS there either
    finally:
        raw.close()
    tls = f"{'mqtts' if family == 'mqtt' else 'stomp+ssl'}://{host}:{port}"
    return TLSException(
        f"the server at {host}:{port} is a TLS listener, and this client spoke plain text "
        f"to it: use a TLS scheme ({tls})", check="plain text on a TLS port")
