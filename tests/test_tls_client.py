"""TLS for the client transports without a broker: the schemes, the options and their
checks, and the error every failed handshake raises (against the loopback servers of
tests/tls_servers.py: certificate checks happen in the handshake, before any protocol).

The same connects against real brokers are in tests/interop/test_tls_interop.py.
"""

from __future__ import annotations

import logging
import shutil
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest
from tls_ca import KEY_PASSWORD, TlsFiles
from tls_servers import plain_server, tls_server

from jmspy import ConnectionFactory, InvalidConfigurationException
from jmspy.address_list import parse
from jmspy.tls import TLS_OPTIONS, TLS_SCHEMES, TlsSettings
from jmspy.tls_errors import TLSException
from jmspy.transport import known_schemes

SCHEMES = ["stomp+ssl", "mqtts"]


def _connect(url: str, **props: Any) -> None:
    conn = ConnectionFactory(url, **props).create_connection()
    conn.close()
    raise AssertionError(f"{url} connected")


def _failure(url: str, **props: Any) -> TLSException:
    with pytest.raises(TLSException) as info:
        _connect(url, **props)
    return info.value


# -- schemes and address lists ----------------------------------------------------------
def test_every_tls_scheme_is_a_known_transport_scheme() -> None:
    assert set(TLS_SCHEMES) <= set(known_schemes())
    assert set(TLS_SCHEMES) == {"stomp+ssl", "stomps", "mqtts", "mqtt+ssl"}


def test_an_address_list_may_mix_plain_and_tls_addresses_of_one_transport() -> None:
    assert parse("stomp://h1:61613,stomp+ssl://h2:61614,stomps://h3:61614") == [
        "stomp://h1:61613", "stomp+ssl://h2:61614", "stomps://h3:61614"]
    assert len(parse("mqtt://h1:1883,mqtts://h2:8883,mqtt+ssl://h3:8883")) == 3


def test_an_address_list_mixing_transports_is_refused_even_over_tls() -> None:
    with pytest.raises(InvalidConfigurationException, match=r"mixes schemes"):
        parse("stomp+ssl://h1:61614,mqtts://h2:8883")


# -- options ----------------------------------------------------------------------------
def test_the_tls_properties_take_their_snake_case_twins(tls_ca: TlsFiles) -> None:
    factory = ConnectionFactory("mqtts://127.0.0.1:1", ssl_ca_file=str(tls_ca.ca),
                                ssl_verify="false")
    assert factory["sslCAFile"] == str(tls_ca.ca) and factory["sslVerify"] is False


def test_a_missing_file_is_named_with_its_property(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(InvalidConfigurationException, match=r"sslCAFile.*no such file.*nope"):
        ConnectionFactory("mqtts://127.0.0.1:1", sslCAFile=str(missing))
    with pytest.raises(InvalidConfigurationException, match=r"sslCAPath.*no such directory"):
        ConnectionFactory("mqtts://127.0.0.1:1", ssl_ca_path=str(missing))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_missing_file_in_the_url_is_named_with_its_property(scheme: str,
                                                              tmp_path: Path) -> None:
    missing = tmp_path / "client.pem"
    with pytest.raises(InvalidConfigurationException, match=r"sslCertFile.*no such file"):
        ConnectionFactory(f"{scheme}://127.0.0.1:1?cert_file={missing}").create_connection()


@pytest.mark.parametrize("raw", ["maybe", "yes", ""])
def test_the_verify_option_takes_only_true_false_1_or_0(raw: str) -> None:
    with pytest.raises(InvalidConfigurationException, match=r"verify.*true or false"):
        TlsSettings.resolve("mqtts", {"verify": raw}, {})
    assert TlsSettings.resolve("mqtts", {"verify": "0"}, {}) == TlsSettings(verify=False)


def test_a_url_option_overrides_the_factory_property(tls_ca: TlsFiles) -> None:
    settings = TlsSettings.resolve("stomps", {"ca_file": str(tls_ca.ca)},
                                   {"sslCAFile": str(tls_ca.other_ca)})
    assert settings is not None and settings.ca_file == str(tls_ca.ca)
    assert set(TLS_OPTIONS.values()) < {*TlsSettings.__slots__, "sslCAFile", "sslCAPath",
                                        "sslCertFile", "sslKeyFile", "sslKeyPassword",
                                        "sslVerify"}


@pytest.mark.parametrize("url", ["stomp://127.0.0.1:1?ca_file=/x", "mqtt://127.0.0.1:1?verify=1"])
def test_a_tls_option_on_a_plain_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidConfigurationException,
                       match=r"connects in plain text.*use (stomp\+ssl|mqtts)://"):
        ConnectionFactory(url).create_connection()


def test_tls_properties_on_a_connection_without_tls_are_refused(tls_ca: TlsFiles) -> None:
    with pytest.raises(InvalidConfigurationException,
                       match=r"sslCAFile is set but no address uses TLS.*stomp\+ssl://"):
        ConnectionFactory("stomp://127.0.0.1:1", sslCAFile=str(tls_ca.ca)).create_connection()


def test_a_key_without_its_certificate_is_refused(tls_ca: TlsFiles) -> None:
    with pytest.raises(InvalidConfigurationException, match=r"sslKeyFile.*without sslCertFile"):
        TlsSettings.resolve("mqtts", {"key_file": str(tls_ca.client_key)}, {})


def test_a_context_and_file_options_together_are_refused(tls_ca: TlsFiles) -> None:
    ctx = ssl.create_default_context()
    with pytest.raises(InvalidConfigurationException, match=r"sslContext and sslCAFile"):
        TlsSettings.resolve("mqtts", {"ca_file": str(tls_ca.ca)}, {"sslContext": ctx})


def test_a_server_context_or_another_object_is_not_taken_as_ssl_context() -> None:
    with pytest.raises(InvalidConfigurationException, match=r"server context"):
        ConnectionFactory("mqtts://127.0.0.1:1",
                          ssl_context=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    with pytest.raises(InvalidConfigurationException, match=r"give an ssl.SSLContext"):
        ConnectionFactory("mqtts://127.0.0.1:1", ssl_context="/etc/ssl")


@pytest.mark.parametrize("props, match", [
    ({"ssl_context": ssl.create_default_context()},
     "cannot use sslContext with this stomp.py.*JMSPY_LIBRARY_HOOKS=0"),
    ({"ssl_ca_path": "."}, "cannot use sslCAPath.*one PEM file"),
])
def test_stomp_refuses_what_stomp_py_cannot_take_on_its_public_path(
        props: dict[str, Any], match: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a tested stomp.py (or with JMSPY_LIBRARY_HOOKS=0) TLS is stomp.py's set_ssl,
    which takes neither; on a tested one jmspy's own TLS takes both
    (tests/stomp_server/test_tls_client_to_broker.py)."""
    from jmspy.transports.stomp import stomppy_private

    monkeypatch.setattr(stomppy_private, "enabled", lambda: False)
    with pytest.raises(InvalidConfigurationException, match=match):
        ConnectionFactory("stomp+ssl://127.0.0.1:1", **props).create_connection()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_encrypted_key_without_its_password_is_a_clear_error(
        scheme: str, tls_ca: TlsFiles) -> None:
    with tls_server(tls_ca.server_cert, tls_ca.server_key) as port, pytest.raises(
            InvalidConfigurationException, match=r"encrypted: give its password as sslKeyPassword"):
        _connect(f"{scheme}://127.0.0.1:{port}", ssl_ca_file=str(tls_ca.ca),
                 ssl_cert_file=str(tls_ca.client_cert),
                 ssl_key_file=str(tls_ca.client_key_encrypted))


def test_a_context_is_made_per_connect_so_a_renewed_ca_file_is_read_again(
        tls_ca: TlsFiles, tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    shutil.copy(tls_ca.other_ca, ca)
    settings = TlsSettings(ca_file=str(ca))
    with tls_server(tls_ca.server_cert, tls_ca.server_key) as port:
        def handshake(ctx: ssl.SSLContext) -> None:
            with socket.create_connection(("127.0.0.1", port)) as raw, \
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass

        with pytest.raises(ssl.SSLCertVerificationError):
            handshake(settings.context(f"127.0.0.1:{port}"))
        shutil.copy(tls_ca.ca, ca)  # the file renewed on disk
        handshake(settings.context(f"127.0.0.1:{port}"))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_verify_off_logs_a_warning_naming_the_risk_at_every_connect(
        scheme: str, tls_ca: TlsFiles, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="jmspy")
    with plain_server() as port:
        for _ in range(2):
            with pytest.raises(Exception):  # noqa: B017 - not a broker: any failure
                _connect(f"{scheme}://127.0.0.1:{port}?verify=false&connect_timeout=2")
    warnings = [r for r in caplog.records if "does NOT verify" in r.getMessage()]
    assert len(warnings) == 2 and "pose as the broker" in warnings[0].getMessage()


# -- what a failed handshake says --------------------------------------------------------
@pytest.mark.parametrize("scheme", sorted(TLS_SCHEMES))  # the aliases too
def test_an_unknown_ca_is_named_with_the_fix(scheme: str, tls_ca: TlsFiles) -> None:
    with tls_server(tls_ca.server_cert, tls_ca.server_key) as port:
        system = _failure(f"{scheme}://127.0.0.1:{port}")  # the system CAs
        other = _failure(f"{scheme}://127.0.0.1:{port}", ssl_ca_file=str(tls_ca.other_ca))
    for error in (system, other):
        assert error.check == "unknown CA"
        assert f"127.0.0.1:{port}" in str(error) and "sslCAFile" in str(error)
        assert "unable to get local issuer certificate" in str(error)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_hostname_mismatch_is_named(scheme: str, tls_ca: TlsFiles) -> None:
    with tls_server(tls_ca.wrong_host_cert, tls_ca.wrong_host_key) as port:
        error = _failure(f"{scheme}://127.0.0.1:{port}?ca_file={tls_ca.ca}")
    assert error.check == "hostname" and "mismatch" in str(error)
    assert f"127.0.0.1:{port}" in str(error) and "subjectAltName" in str(error)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_expired_certificate_is_named(scheme: str, tls_ca: TlsFiles) -> None:
    with tls_server(tls_ca.expired_cert, tls_ca.expired_key) as port:
        error = _failure(f"{scheme}://127.0.0.1:{port}?ca_file={tls_ca.ca}")
    assert error.check == "expired" and "has expired" in str(error)
    assert f"127.0.0.1:{port}" in str(error)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_required_client_certificate_is_named(scheme: str, tls_ca: TlsFiles) -> None:
    with tls_server(tls_ca.server_cert, tls_ca.server_key, client_ca=tls_ca.ca) as port:
        missing = _failure(f"{scheme}://127.0.0.1:{port}?ca_file={tls_ca.ca}")
        refused = _failure(f"{scheme}://127.0.0.1:{port}", ssl_ca_file=str(tls_ca.ca),
                           ssl_cert_file=str(tls_ca.other_client_cert),
                           ssl_key_file=str(tls_ca.other_client_key))
    for error in (missing, refused):
        assert error.check == "client certificate", error
        assert "sslCertFile" in str(error) and f"127.0.0.1:{port}" in str(error)


@pytest.mark.parametrize("scheme", ["stomp", "mqtt"])
def test_a_plain_client_on_a_tls_port_is_told_to_use_tls(scheme: str,
                                                         tls_ca: TlsFiles) -> None:
    with tls_server(tls_ca.server_cert, tls_ca.server_key) as port:
        error = _failure(f"{scheme}://127.0.0.1:{port}?connect_timeout=5")
    assert error.check == "plain text on a TLS port"
    tls = "stomp+ssl" if scheme == "stomp" else "mqtts"
    assert f"{tls}://127.0.0.1:{port}" in str(error)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("silent", [False, True], ids=["closes", "silent"])
def test_a_tls_client_on_a_plain_port_is_told_so(scheme: str, silent: bool) -> None:
    with plain_server(silent=silent) as port:
        error = _failure(f"{scheme}://127.0.0.1:{port}?connect_timeout=1")
    assert error.check == "not a TLS port", error
    assert "plain-text" in str(error) and f"127.0.0.1:{port}" in str(error)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_tls_failure_is_raised_without_the_ssl_traceback(scheme: str,
                                                           tls_ca: TlsFiles) -> None:
    with tls_server(tls_ca.server_cert, tls_ca.server_key) as port:
        error = _failure(f"{scheme}://127.0.0.1:{port}")
    assert not isinstance(error.__cause__, ssl.SSLError) or scheme != "mqtts"
    assert error.__suppress_context__ or not isinstance(error.__context__, ssl.SSLError)


def test_the_key_password_is_not_shown_in_the_settings_repr() -> None:
    assert KEY_PASSWORD not in repr(TlsSettings(key_password=KEY_PASSWORD))
