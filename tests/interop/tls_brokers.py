"""Real brokers with TLS listeners for the client's TLS tests, on free loopback ports.

* Mosquitto: a plain listener, a TLS one, a TLS one that requires a client
  certificate and takes its subject's CN as the user (``use_identity_as_username``),
  and two that present a bad certificate: one for another host name, one expired.
* RabbitMQ: a STOMP TLS listener (``stomp.listeners.ssl.1``) and an MQTT one
  (``mqtt.listeners.ssl.1``) that require a client certificate (``verify_peer``,
  ``fail_if_no_peer_cert``: one ``ssl_options`` for both), beside its plain ones.
  A broker of its own (the session's RabbitMQ is started before any certificate exists).
* ActiveMQ 5: two ``stomp+ssl://`` connectors beside its plain STOMP one, its keys in a
  PKCS#12 keystore (Java reads no PEM keys) and the CA in a PKCS#12 trust store: one
  that asks no client certificate (``transport.needClientAuth=false``) and one that
  requires a certificate the CA signed (``transport.needClientAuth=true``; the trust
  store is the connectors' shared ``sslContext``). A broker of its own too, for the
  same reason; started only by the tests that use it (it is slow to start).

The certificates come from the session's throwaway CA (``tls_ca``), copied into the
broker's directory readable by all: Mosquitto drops root privileges to its own user.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from brokers import HOST, ActiveMQ, BrokerProcess, BrokerStartError, Mosquitto, RabbitMQ, free_port
from tls_ca import KEY_PASSWORD, TlsFiles

__all__ = [
    "TlsActiveMQ",
    "TlsMosquitto",
    "TlsRabbitMQ",
    "start_tls_activemq",
    "start_tls_mosquitto",
    "start_tls_rabbitmq",
]


def _copy(tls: TlsFiles, work: Path, *more: str) -> dict[str, Path]:
    files = {}
    for name in ("ca", "server_cert", "server_key", *more):
        target = work / f"{name}.pem"
        shutil.copy(getattr(tls, name), target)
        target.chmod(0o644)  # the broker may run as another user; test keys only
        files[name] = target
    return files


@dataclass
class TlsMosquitto:
    broker: BrokerProcess
    plain_port: int
    tls_port: int  #: TLS, no client certificate asked
    mutual_port: int  #: TLS, a client certificate required (its CN is the user)
    wrong_host_port: int  #: TLS with a certificate for wrong.example only
    expired_port: int  #: TLS with an expired certificate


def start_tls_mosquitto(tls: TlsFiles) -> tuple[Mosquitto, TlsMosquitto]:
    """Mosquitto with the three listeners (see the module); stop it with ``.close()``."""
    mosquitto = Mosquitto()
    files = _copy(tls, mosquitto.work, "wrong_host_cert", "wrong_host_key", "expired_cert",
                  "expired_key")
    tls_port, mutual_port, wrong_port, expired_port = (free_port() for _ in range(4))

    def certs(name: str = "server") -> str:
        return (f"cafile {files['ca']}\ncertfile {files[name + '_cert']}\n"
                f"keyfile {files[name + '_key']}\n")

    mosquitto.conf.write_text(
        "per_listener_settings true\npersistence false\nlog_dest stdout\n"
        "max_queued_messages 0\n"
        f"listener {mosquitto.mqtt_port} {HOST}\nallow_anonymous true\n"
        f"listener {tls_port} {HOST}\nallow_anonymous true\n{certs()}"
        f"listener {mutual_port} {HOST}\nallow_anonymous true\n{certs()}"
        "require_certificate true\nuse_identity_as_username true\n"
        f"listener {wrong_port} {HOST}\nallow_anonymous true\n{certs('wrong_host')}"
        f"listener {expired_port} {HOST}\nallow_anonymous true\n{certs('expired')}")
    broker = mosquitto.start()
    broker.wait_ready([tls_port, mutual_port, wrong_port, expired_port],
                      mosquitto.ready_timeout)
    assert mosquitto.mqtt_port is not None
    return mosquitto, TlsMosquitto(broker, mosquitto.mqtt_port, tls_port, mutual_port,
                                   wrong_port, expired_port)


class TlsRabbitMQ(RabbitMQ):
    """RabbitMQ with STOMP and MQTT TLS listeners requiring client certificates too."""

    name = "rabbitmq-tls"

    def __init__(self, tls: TlsFiles) -> None:
        super().__init__()
        files = _copy(tls, self.work)
        self.stomp_tls_port, self.mqtt_tls_port = free_port(), free_port()
        conf = self.work / "rabbitmq.conf"
        text = conf.read_text()
        conf.write_text(text + (
            f"stomp.listeners.ssl.1 = {HOST}:{self.stomp_tls_port}\n"
            f"mqtt.listeners.ssl.1 = {HOST}:{self.mqtt_tls_port}\n"
            f"ssl_options.cacertfile = {files['ca']}\n"
            f"ssl_options.certfile = {files['server_cert']}\n"
            f"ssl_options.keyfile = {files['server_key']}\n"
            "ssl_options.verify = verify_peer\n"
            "ssl_options.fail_if_no_peer_cert = true\n"))


def start_tls_rabbitmq(tls: TlsFiles) -> TlsRabbitMQ:
    """A started :class:`TlsRabbitMQ`; stop it with ``.close()``."""
    rabbit = TlsRabbitMQ(tls)
    broker = rabbit.start()
    try:
        broker.wait_ready([rabbit.stomp_tls_port, rabbit.mqtt_tls_port],
                          rabbit.ready_timeout)
    except Exception:
        rabbit.close()
        raise
    return rabbit


class TlsActiveMQ(ActiveMQ):
    """ActiveMQ 5 with ``stomp+ssl://`` connectors on ``stomp_tls_port`` (no client
    certificate asked) and ``stomp_mutual_port`` (one required; see the module)."""

    name = "activemq-tls"

    def __init__(self, tls: TlsFiles) -> None:
        super().__init__()
        keystore, truststore = self.conf / "server.p12", self.conf / "ca.p12"
        shutil.copy(tls.server_p12, keystore)
        shutil.copy(tls.ca_p12, truststore)
        self.stomp_tls_port, self.stomp_mutual_port = free_port(), free_port()
        xml_path = self.conf / "activemq.xml"
        xml = xml_path.read_text()
        ssl_context = (
            "<sslContext><sslContext"
            f' keyStore="file:{keystore}" keyStoreType="PKCS12"'
            f' keyStorePassword="{KEY_PASSWORD}"'
            f' trustStore="file:{truststore}" trustStoreType="PKCS12"'
            f' trustStorePassword="{KEY_PASSWORD}"/></sslContext>\n    <transportConnectors>')
        connector = "".join(
            f'<transportConnector name="{name}" uri="stomp+ssl://{HOST}:{port}'
            f'?transport.needClientAuth={need}"/>\n      '
            for name, port, need in (("stomp+ssl", self.stomp_tls_port, "false"),
                                     ("stomp+ssl-mutual", self.stomp_mutual_port, "true"))
        ) + '<transportConnector name="mqtt"'
        for old, new in (("<transportConnectors>", ssl_context),
                         ('<transportConnector name="mqtt"', connector)):
            if old not in xml:
                raise BrokerStartError(f"activemq.xml has no {old!r} to extend: {xml_path}")
            xml = xml.replace(old, new, 1)
        xml_path.write_text(xml)


def start_tls_activemq(tls: TlsFiles) -> TlsActiveMQ:
    """A started :class:`TlsActiveMQ` whose TLS connectors listen; stop it with
    ``.close()``. One that cannot start raises BrokerStartError with its log's tail."""
    amq = TlsActiveMQ(tls)
    broker = amq.start()
    try:
        broker.wait_ready([amq.stomp_tls_port, amq.stomp_mutual_port], amq.ready_timeout)
    except Exception:
        amq.close()
        raise
    return amq
