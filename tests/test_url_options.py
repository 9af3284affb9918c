"""URL query options: each scheme takes exactly the options of its table, refuses any other
(naming the known ones and the closest), converts every value strictly, and the docs list
exactly those tables. Nothing here connects: the refusals happen when the factory is made
(or, for a list set later, when the transport is built, before any socket)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from jmspy import ConnectionFactory
from jmspy.errors import InvalidConfigurationException
from jmspy.tls import TLS_OPTIONS, TLS_URL_OPTIONS
from jmspy.transports.mqtt.url_options import MQTT_URL_OPTIONS
from jmspy.transports.stomp.url_options import STOMP_URL_OPTIONS
from jmspy.transports.vm_url_options import VM_URL_OPTIONS
from jmspy.url_options import OptionTable, text

ROOT = Path(__file__).resolve().parent.parent
#: each scheme's table, a URL of it without options, and the doc page that lists it
SCHEMES = {
    "vm": (VM_URL_OPTIONS, "vm://url-options-test", "docs/transports.md"),
    "stomp": (STOMP_URL_OPTIONS, "stomp://127.0.0.1:1", "docs/transports.md"),
    "mqtt": (MQTT_URL_OPTIONS, "mqtt://127.0.0.1:1", "docs/mqtt.md"),
}
OPTIONS = [(scheme, name) for scheme, (table, _, _) in SCHEMES.items() for name in table]


def _url(scheme: str, query: str) -> str:
    return f"{SCHEMES[scheme][1]}?{query}"


def _refusal(url: str, **properties: object) -> str:
    with pytest.raises(InvalidConfigurationException) as err:
        ConnectionFactory(url, **properties)
    return str(err.value)


def _doc_rows(scheme: str) -> list[str]:
    """The option names of the doc table of ``scheme`` (the rows after its header)."""
    table, _, page = SCHEMES[scheme]
    doc = (ROOT / page).read_text()
    at = doc.index(table.reference_table().splitlines()[2])  # its first row
    rows = doc[at:].split("\n\n", 1)[0].splitlines()
    return [re.match(r"\| `([^`]+)` \|", row).group(1) for row in rows]  # type: ignore[union-attr]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_unknown_option_is_refused_naming_every_known_one(scheme: str) -> None:
    message = _refusal(_url(scheme, "colour=blue"))
    assert f"unknown {scheme}:// URL option 'colour'" in message
    assert all(name in message for name in SCHEMES[scheme][0])


@pytest.mark.parametrize(("scheme", "name"), OPTIONS)
def test_a_misspelt_option_is_refused_with_the_right_suggestion(scheme: str, name: str) -> None:
    misspelt = name[:-2] + name[-1]  # one letter dropped near the end
    message = _refusal(_url(scheme, f"{misspelt}=1"))
    assert f"option {misspelt!r}. Did you mean {name!r}?" in message


def test_the_issue_examples_are_refused() -> None:
    assert "Did you mean 'dialect'?" in _refusal("stomp://h:61613?dialekt=activemq")
    assert "unknown vm:// URL option 'foo'" in _refusal("vm://x?foo=1")
    assert "sync_send='no'" in _refusal("mqtt://h:1883?sync_send=no")


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("ask", ["ssl=true", "tls=1", "use_ssl=true", "ssl_cafile=ca.pem"])
def test_asking_a_plain_scheme_for_tls_points_to_the_tls_schemes(scheme: str, ask: str) -> None:
    message = _refusal(_url(scheme, ask))
    assert f"{scheme}:// does not take {ask.split('=')[0]}=" in message
    assert "stomp+ssl://" in message and "mqtts://" in message
    assert "Did you mean" not in message


@pytest.mark.parametrize(("scheme", "name"), [
    (scheme, name) for scheme, name in OPTIONS
    if SCHEMES[scheme][0][name].accepts.startswith("true or false")])
def test_booleans_take_true_false_1_0_in_any_case_and_nothing_else(scheme: str,
                                                                    name: str) -> None:
    table = SCHEMES[scheme][0]
    for raw, value in (("true", True), ("FALSE", False), ("True", True), ("1", True),
                       ("0", False)):
        assert table.parse(_url(scheme, f"{name}={raw}"))[name] is value
    for raw in ("no", "yes", "on", "", "2", " true"):
        message = _refusal(_url(scheme, f"{name}={raw}"))
        assert f"{name}={raw!r}: use true or false" in message


@pytest.mark.parametrize(("scheme", "name"), [
    (scheme, name) for scheme, name in OPTIONS
    if SCHEMES[scheme][0][name].accepts.startswith(("a whole number", "a number"))])
def test_numbers_out_of_range_or_not_numbers_are_refused(scheme: str, name: str) -> None:
    option = SCHEMES[scheme][0][name]
    bad = ["ten", "", "-1", "1e999" if "whole" not in option.accepts else "1.5"]
    most = re.search(r"at most (\d+)", option.accepts)
    if most:
        bad.append(str(int(most.group(1)) + 1))
    if option.accepts.startswith("a number"):
        bad += ["0", "nan", "inf"]
    for raw in bad:
        message = _refusal(_url(scheme, f"{name}={raw}"))
        assert f"{scheme}:// {name}={raw!r}: use {option.accepts}" in message


@pytest.mark.parametrize(("scheme", "name"), OPTIONS)
def test_a_value_an_option_does_not_take_is_refused_naming_both(scheme: str, name: str) -> None:
    message = _refusal(_url(scheme, f"{name}=%00bogus"))
    assert f"{name}='\\x00bogus'" in message


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_doc_table_is_the_code_table(scheme: str) -> None:
    table, _, page = SCHEMES[scheme]
    assert table.reference_table() in (ROOT / page).read_text(), (
        f"{page}'s {scheme}:// option table differs from the code's: paste "
        f"{scheme.upper()}_URL_OPTIONS.reference_table() there")
    assert _doc_rows(scheme) == list(table)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_documented_option_is_accepted(scheme: str) -> None:
    table = SCHEMES[scheme][0]
    for name in _doc_rows(scheme):
        example = table[name].example
        ConnectionFactory(_url(scheme, f"{name}={example}"))
        assert table.parse(_url(scheme, f"{name}={example}"))[name] != table[name].default


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_option_given_twice_is_refused(scheme: str) -> None:
    name = next(iter(SCHEMES[scheme][0]))
    example = SCHEMES[scheme][0][name].example
    assert f"option {name!r} given twice" in _refusal(
        _url(scheme, f"{name}={example}&{name}={example}"))


@pytest.mark.parametrize("scheme", ["stomp", "mqtt"])
def test_every_entry_of_an_address_list_is_checked(scheme: str) -> None:
    good = f"{scheme}://h1:1,{scheme}://h2:1"
    ConnectionFactory(good)
    bad = f"{scheme}://h1:1,{scheme}://h2:1?colour=blue"
    assert "unknown" in _refusal(bad) and "'colour'" in _refusal(bad)
    assert "'colour'" in _refusal(None, imqAddressList=bad)  # type: ignore[arg-type]
    assert "'colour'" in _refusal(None, address_list=bad)  # type: ignore[arg-type]


def test_stomp_entries_of_a_list_each_keep_their_own_options() -> None:
    from jmspy.transports.stomp.transport import StompTransport

    listed = "stomp://h1:1?heartbeat=0,stomp://h2:1?heartbeat=500"
    transport = StompTransport(urlsplit(listed.split(",")[0]), {"imqAddressList": listed})
    assert [a.heartbeat for a in transport._addresses] == [0, 500]


def test_mqtt_list_entries_whose_options_would_be_ignored_are_refused() -> None:
    ConnectionFactory("mqtt://h1:1?keepalive=5,mqtt://h2:1?keepalive=5")
    message = _refusal("mqtt://h1:1?keepalive=5,mqtt://h2:1")
    assert "'mqtt://h2:1' has other URL options than the first" in message


def test_a_list_set_after_the_factory_is_refused_before_any_socket() -> None:
    factory = ConnectionFactory()
    factory["imqAddressList"] = "stomp://127.0.0.1:1,stomp://127.0.0.1:1?hartbeat=0"
    with pytest.raises(InvalidConfigurationException, match="Did you mean 'heartbeat'"):
        factory.create_connection()  # nothing listens on port 1: a socket would fail


def test_the_transports_read_what_the_url_says() -> None:
    from jmspy.transports.mqtt.transport import MqttTransport
    from jmspy.transports.stomp.connect import ConnectOptions

    mqtt = MqttTransport(urlsplit("mqtt://h:1?sync_send=0&keepalive=0&send_window=7"
                                  "&session_expiry=60&connect_timeout=0.5&version=3.1.1"), {})
    assert (mqtt.sync_send, mqtt.keepalive, mqtt.send_window, mqtt.session_expiry,
            mqtt.connect_timeout, mqtt.version) == (False, 0, 7, 60, 0.5, "3.1.1")
    stomp = ConnectOptions.parse(urlsplit(
        "stomp://h:1?version=1.1&heartbeat=0&vhost=v&connect_timeout=2.5&dialect=rabbitmq"
        "&max_frame_bytes=9&rabbitmq_queue_selectors=discard&idle_spin_us=0"), {})
    assert (stomp.version, stomp.heartbeat, stomp.vhost, stomp.connect_timeout, stomp.dialect,
            stomp.max_frame_bytes, stomp.queue_selectors_discard, stomp.idle_spin_us) == (
        "1.1", 0, "v", 2.5, "rabbitmq", 9, True, 0)
    with pytest.raises(InvalidConfigurationException, match="no in-process broker named"):
        ConnectionFactory("vm://url-options-absent?create=0").create_connection()


def test_each_transport_declares_the_table_its_scheme_reads() -> None:
    from jmspy.transports.mqtt.transport import MqttTransport
    from jmspy.transports.stomp.transport import StompTransport
    from jmspy.transports.vm import VmTransport

    assert VmTransport.url_options == {"vm": VM_URL_OPTIONS}
    assert StompTransport.url_options["stomp"] is STOMP_URL_OPTIONS
    assert MqttTransport.url_options["mqtt"] is MQTT_URL_OPTIONS
    tls_names = [option.name for option in TLS_URL_OPTIONS]
    for transport, plain, schemes in ((StompTransport, STOMP_URL_OPTIONS, ("stomp+ssl", "stomps")),
                                      (MqttTransport, MQTT_URL_OPTIONS, ("mqtts", "mqtt+ssl"))):
        assert set(transport.url_options) == {plain.scheme, *schemes}
        for scheme in schemes:  # the plain rows and the TLS ones (jmspy/tls.py)
            assert list(transport.url_options[scheme]) == [*plain, *tls_names]


def test_a_tls_scheme_adds_its_options_to_the_plain_table_in_one_line() -> None:
    secure = STOMP_URL_OPTIONS.plus("stomps-test", [text("ca_file", "x.pem", "a CA file")])
    assert list(secure) == [*STOMP_URL_OPTIONS, "ca_file"]
    parsed = secure.parse("stomps-test://h:1?ca_file=ca.pem&heartbeat=0")
    assert (parsed["ca_file"], parsed["heartbeat"]) == ("ca.pem", 0)
    with pytest.raises(InvalidConfigurationException, match="always speaks TLS"):
        secure.parse("stomps-test://h:1?ssl=true")
    with pytest.raises(InvalidConfigurationException, match="Did you mean 'ca_file'"):
        secure.parse("stomps-test://h:1?ca_fil=ca.pem")
    with pytest.raises(ValueError, match="declared twice"):
        OptionTable("t", [text("a", "x", ""), text("a", "y", "")])


def test_the_spark_data_source_refuses_a_bad_url_option_before_any_query_runs() -> None:
    from jmspy.spark.options import parse_options

    with pytest.raises(InvalidConfigurationException,
                       match=r"jmspy data source: unknown stomp:// URL option 'hartbeat'\. "
                             r"Did you mean 'heartbeat'\?"):
        parse_options({"url": "stomp://127.0.0.1:1?hartbeat=0", "destination": "queue://q"})
    parse_options({"url": "stomp://127.0.0.1:1?heartbeat=0", "destination": "queue://q"})


def test_the_tls_url_options_are_the_tls_property_twins() -> None:
    """One list of TLS query names: the table rows and jmspy.tls's name -> property map."""
    assert [option.name for option in TLS_URL_OPTIONS] == list(TLS_OPTIONS)


def test_a_list_may_mix_a_plain_scheme_and_its_tls_twin_each_with_its_own_options(
        tls_ca: Any) -> None:
    ConnectionFactory(f"stomp://127.0.0.1:1?heartbeat=0,stomp+ssl://127.0.0.1:2?"
                      f"ca_file={tls_ca.ca}&heartbeat=0")
    with pytest.raises(InvalidConfigurationException, match="connects in plain text"):
        ConnectionFactory(f"stomp+ssl://127.0.0.1:2,stomp://127.0.0.1:1?ca_file={tls_ca.ca}")
