"""``[broker.tls]``: every mistake in the table is refused when the config is read, naming
the file, the table and the key; every unusable file it names is refused when the broker
starts (before it listens), naming the file and what to do."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jmspy.broker_ref.config import ConfigError, load_config
from jmspy.broker_ref.protocols.stomp import runner
from jmspy.broker_ref.tls_config import DEFAULT_TLS_PORT, TlsConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broker.toml"
    path.write_text(text, encoding="utf-8")
    return path


def tls_table(files: Any, extra: str = "", *, key: Path | None = None) -> str:
    return (f'[broker.tls]\ncert = "{files.server_cert}"\nkey = "{key or files.server_key}"\n'
            f"{extra}")


def test_a_tls_table_gives_defaults_and_paths_relative_to_the_config_file(
        tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[broker.tls]\ncert = "s.pem"\nkey = "s.key"\n'
                                         'ca = "/etc/ca.pem"\n'))
    tls = config.tls
    assert (tls.cert, tls.key, tls.ca) == (str(tmp_path / "s.pem"), str(tmp_path / "s.key"),
                                           "/etc/ca.pem")
    assert (tls.port, tls.min_version, tls.require_client_cert, tls.identity_as_user,
            tls.user_from_cert, tls.only) == (DEFAULT_TLS_PORT, "TLSv1.2", False, False,
                                              "CN", False)


def test_no_tls_table_means_no_tls_listener(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "[broker]\nport = 0\n")).tls is None


@pytest.mark.parametrize(("table", "words"), [
    ('cert = "a"\nkey = "b"\nrequire-client-certs = true\n',
     ["[broker.tls] require-client-certs", "did you mean 'require-client-cert'"]),
    ('cert = "a"\n', ["[broker.tls] key", "missing"]),
    ('cert = "a"\nkey = "b"\nport = 70000\n', ["[broker.tls] port", "65535"]),
    ('cert = "a"\nkey = "b"\nmin-version = "TLSv1.1"\n', ["min-version", "'TLSv1.3'"]),
    ('cert = "a"\nkey = "b"\nciphers = "NO-SUCH-CIPHER"\n', ["ciphers", "selects no cipher"]),
    ('cert = "a"\nkey = "b"\nrequire-client-cert = true\n', ["require-client-cert", "ca"]),
    ('cert = "a"\nkey = "b"\nca = "c"\nidentity-as-user = true\n',
     ["identity-as-user", "[security]"]),
    ('cert = "a"\nkey = "b"\nca = "c"\nuser-from-cert = "CommonName"\n',
     ["user-from-cert", "CN, emailAddress"]),
    ('cert = "a"\nkey = "b"\nkey-password = "x"\nkey-password-file = "y"\n',
     ["key-password", "not both"]),
    ('cert = "a"\nkey = "b"\nonly = "yes"\n', ["[broker.tls] only", "true or false"]),
])
def test_a_wrong_tls_table_is_refused_naming_file_table_and_key(
        tmp_path: Path, table: str, words: list[str]) -> None:
    path = write(tmp_path, f"[broker.tls]\n{table}")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    for word in words:
        assert word in message


def test_plain_and_tls_listener_on_one_port_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="need a port each"):
        load_config(write(tmp_path, '[broker]\nport = 7000\n[broker.tls]\ncert = "a"\n'
                                    'key = "b"\nport = 7000\n'))


def start(path: Path) -> None:
    """What ``jmspy broker`` does first: serve() reads the TLS files before it listens."""
    config = load_config(path)
    config.data_dir = None
    asyncio.run(runner.serve(config, asyncio.Event()))


def test_a_missing_certificate_file_stops_the_start_naming_it(
        tmp_path: Path, tls_ca: Any) -> None:
    missing = tmp_path / "nowhere.pem"
    path = write(tmp_path, f'[broker.tls]\ncert = "{missing}"\nkey = "{tls_ca.server_key}"\n')
    with pytest.raises(TlsConfigError, match=f"cert: cannot read {missing}: No such file"):
        start(path)


def test_a_key_that_is_not_the_certificates_stops_the_start(
        tmp_path: Path, tls_ca: Any) -> None:
    path = write(tmp_path, tls_table(tls_ca, key=tls_ca.client_key))
    with pytest.raises(TlsConfigError) as caught:
        start(path)
    assert f"{tls_ca.client_key} is not the private key of {tls_ca.server_cert}" in str(
        caught.value)


def test_a_file_that_is_no_certificate_stops_the_start(tmp_path: Path, tls_ca: Any) -> None:
    path = write(tmp_path, f'[broker.tls]\ncert = "{tls_ca.server_key}"\n'
                           f'key = "{tls_ca.server_key}"\n')
    with pytest.raises(TlsConfigError, match="holds no PEM begin certificate section"):
        start(path)


def test_an_encrypted_key_without_its_password_stops_the_start(
        tmp_path: Path, tls_ca: Any) -> None:
    path = write(tmp_path, f'[broker.tls]\ncert = "{tls_ca.client_cert}"\n'
                           f'key = "{tls_ca.client_key_encrypted}"\n')
    with pytest.raises(TlsConfigError, match="encrypted and its password is missing"):
        start(path)


def test_an_encrypted_key_with_a_wrong_password_file_stops_the_start(
        tmp_path: Path, tls_ca: Any) -> None:
    secret = tmp_path / "key.pw"
    secret.write_text("not-the-password\n", encoding="utf-8")
    path = write(tmp_path, f'[broker.tls]\ncert = "{tls_ca.client_cert}"\n'
                           f'key = "{tls_ca.client_key_encrypted}"\n'
                           'key-password-file = "key.pw"\n')
    with pytest.raises(TlsConfigError, match="encrypted and its password is wrong"):
        start(path)


def test_a_ca_file_without_certificates_stops_the_start(tmp_path: Path, tls_ca: Any) -> None:
    path = write(tmp_path, tls_table(tls_ca, f'ca = "{tls_ca.server_key}"\n'))
    with pytest.raises(TlsConfigError, match=f"ca: cannot load CA certificates from "
                                             f"{tls_ca.server_key}"):
        start(path)
