"""A throwaway certificate authority for the TLS tests: made once per test session.

Every TLS test (the client's schemes, ``jmspy broker``'s TLS listener, the real brokers'
TLS listeners) needs the same few files: a CA, a server certificate for 127.0.0.1 and
localhost signed by it, a client certificate signed by it, and the certificates each
failure case needs (another CA, a wrong host name, an expired one). They are made with
the ``cryptography`` package (a test dependency), written as PEM files (and a PKCS#12
keystore for ActiveMQ), and kept for the session by the ``tls_ca`` fixture in conftest.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["KEY_PASSWORD", "TlsFiles", "make_ca"]

#: the password of the encrypted copy of the client key and of the PKCS#12 keystores
KEY_PASSWORD = "jmspy-test"
_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class TlsFiles:
    """Paths of the PEM files (and keystores) a session's TLS tests use."""

    ca: Path  #: the CA certificate clients and brokers trust
    server_cert: Path  #: for DNS:localhost and IP:127.0.0.1, signed by the CA
    server_key: Path
    client_cert: Path  #: subject CN=alice, signed by the CA (clientAuth)
    client_key: Path
    client_key_encrypted: Path  #: the same key, encrypted with KEY_PASSWORD
    other_ca: Path  #: a CA that signed nothing here: trusting only it must fail
    other_client_cert: Path  #: CN=mallory, signed by the other CA (a refused client)
    other_client_key: Path
    wrong_host_cert: Path  #: signed by the CA, for DNS:wrong.example only
    wrong_host_key: Path
    expired_cert: Path  #: signed by the CA, for 127.0.0.1/localhost, expired a year ago
    expired_key: Path
    server_p12: Path  #: server certificate and key as PKCS#12 (KEY_PASSWORD), for Java
    ca_p12: Path  #: the CA certificate as a PKCS#12 trust store (KEY_PASSWORD), for Java


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "jmspy tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY).not_valid_after(now + 30 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False),
                critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def _leaf(ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], cn: str, *,
          server: bool, names: list[x509.GeneralName] | None = None,
          expired: bool = False) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = ca
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    start, end = (now - 400 * _DAY, now - 365 * _DAY) if expired else (now - _DAY,
                                                                        now + 30 * _DAY)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (x509.CertificateBuilder().subject_name(_name(cn))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey, password: str | None = None
               ) -> Path:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8, encryption))
    path.chmod(0o600)
    return path


def make_ca(directory: Path) -> TlsFiles:
    """Make the CA and every certificate in ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    local: list[x509.GeneralName] = [x509.DNSName("localhost"),
                                     x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    ca = _ca("jmspy test CA")
    other = _ca("jmspy other test CA")
    server = _leaf(ca, "localhost", server=True, names=local)
    client = _leaf(ca, "alice", server=False)
    other_client = _leaf(other, "mallory", server=False)
    wrong = _leaf(ca, "wrong.example", server=True, names=[x509.DNSName("wrong.example")])
    expired = _leaf(ca, "localhost", server=True, names=local, expired=True)
    d = directory
    server_p12 = d / "server.p12"
    server_p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"server", server[1], server[0], [ca[0]],
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode())))
    ca_p12 = d / "ca.p12"
    ca_p12.write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca[0], b"ca")],
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode())))
    return TlsFiles(
        ca=_write_cert(d / "ca.pem", ca[0]),
        server_cert=_write_cert(d / "server.pem", server[0]),
        server_key=_write_key(d / "server.key", server[1]),
        client_cert=_write_cert(d / "client.pem", client[0]),
        client_key=_write_key(d / "client.key", client[1]),
        client_key_encrypted=_write_key(d / "client-encrypted.key", client[1], KEY_PASSWORD),
        other_ca=_write_cert(d / "other-ca.pem", other[0]),
        other_client_cert=_write_cert(d / "other-client.pem", other_client[0]),
        other_client_key=_write_key(d / "other-client.key", other_client[1]),
        wrong_host_cert=_write_cert(d / "wrong-host.pem", wrong[0]),
        wrong_host_key=_write_key(d / "wrong-host.key", wrong[1]),
        expired_cert=_write_cert(d / "expired.pem", expired[0]),
        expired_key=_write_key(d / "expired.key", expired[1]),
        server_p12=server_p12,
        ca_p12=ca_p12,
    )
