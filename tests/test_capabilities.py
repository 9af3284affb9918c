"""The capability matrix: the docs are its rendering, refusals come from it, and every
vm:// cell behaves as it says (the STOMP and MQTT columns are run against real brokers in
tests/interop).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from capability_probes import PROBES, Rig, check_cell

from jmspy.capabilities import Feature, RefusedFeatureException, Support, refused
from jmspy.transports import capabilities as matrix
from jmspy.transports.mqtt.transport import MqttTransport
from jmspy.transports.stomp.mapping import STOMP_TARGETS, detect_broker, profile_key
from jmspy.transports.vm import VmTransport

DOC = Path(__file__).resolve().parents[1] / "docs" / "capabilities.md"


def test_docs_show_the_matrix_the_code_uses() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert matrix.rewrite(text) == text, (
        "docs/capabilities.md is stale: python -P -m jmspy.transports.capabilities "
        "docs/capabilities.md"
    )
    assert matrix.render_markdown() in text


def test_docs_link_the_matrix() -> None:
    root = DOC.parent.parent
    for doc in ("README.md", "docs/transports.md", "docs/mqtt.md"):
        assert "capabilities.md" in (root / doc).read_text(encoding="utf-8"), doc


def test_regenerating_rewrites_only_the_generated_block(tmp_path: Path) -> None:
    doc = tmp_path / "c.md"
    doc.write_text(f"intro\n{matrix.BEGIN}\nstale\n{matrix.END}\noutro\n")
    assert matrix.main([str(doc)]) == 0
    assert doc.read_text() == (
        f"intro\n{matrix.BEGIN}\n{matrix.render_markdown()}{matrix.END}\noutro\n")
    doc.write_text("no markers")
    with pytest.raises(ValueError, match="capability matrix"):
        matrix.main([str(doc)])


def test_every_target_has_every_feature_and_every_refusal_says_what_to_do() -> None:
    assert [(c.transport, c.key) for c in matrix.TARGETS] == [
        ("vm", "embedded"), *(("stomp", k) for k in STOMP_TARGETS), ("mqtt", "5"),
        ("mqtt", "3.1.1")]
    for col in matrix.TARGETS:
        assert set(col.cells) == set(Feature), col.title
        for feature, c in col.cells.items():
            assert "|" not in c.text() and "\n" not in c.text(), (col.title, feature)
            if c.support is Support.REFUSED:
                assert c.how and c.instead, (col.title, feature)
            if c.blocked_by is not None:
                assert col.cells[c.blocked_by].support is Support.REFUSED
    assert set(PROBES) == set(Feature)
    with pytest.raises(ValueError, match="instead"):
        refused("no reason to give", "")


def test_every_stomp_profile_has_a_column() -> None:
    for server, key in [("jmspy-broker_ref/0.1", "jmspy"), ("ActiveMQ/5.17.2", "activemq"),
                        ("ActiveMQ-Artemis/2.31", "artemis"), ("RabbitMQ/3.10.8", "rabbitmq"),
                        ("CoilMQ/1.1", "unknown")]:
        profile = detect_broker(server)
        assert matrix.column("stomp", key).cells, server
        assert profile_key(profile) == key  # the column whose flags the transport takes


def test_require_raises_the_refusal_naming_transport_broker_and_remedy() -> None:
    matrix.require("stomp", "activemq", Feature.BROWSER, where="x")  # native: returns
    with pytest.raises(RefusedFeatureException) as info:
        matrix.require("stomp", "rabbitmq", Feature.BROWSER,
                       where="RabbitMQ/3.10.8 at 127.0.0.1:61613")
    err = info.value
    assert (err.feature, err.transport, err.target) == (Feature.BROWSER, "stomp", "rabbitmq")
    assert str(err).startswith(
        "queue browser is not supported by the stomp:// transport on RabbitMQ "
        "(RabbitMQ/3.10.8 at 127.0.0.1:61613): ")
    assert matrix.cell("stomp", "rabbitmq", Feature.BROWSER).instead in str(err)
    with pytest.raises(RefusedFeatureException) as info:
        matrix.require("mqtt", "3.1.1", Feature.QUEUE_SELECTORS, where="broker at h:1",
                       detail="a selector on a queue")
    assert info.value.feature is Feature.QUEUES  # what blocks it
    assert str(info.value).startswith("a selector on a queue is not supported by the mqtt://")


def test_a_refusal_site_the_matrix_contradicts_says_so() -> None:
    """A transport with no implementation raises refusal() unconditionally; were the matrix
    to claim the feature works there, the error must say they disagree."""
    err = matrix.refusal("vm", "embedded", Feature.BROWSER, where="vm://x")
    assert "marks it native" in str(err) and "jmspy bug" in str(err)


def test_transport_capabilities_are_the_matrix_native_features() -> None:
    assert VmTransport.capabilities == matrix.native_features("vm", "embedded")
    assert Feature.BROWSER in VmTransport.capabilities
    assert Feature.QUEUES in matrix.native_features("mqtt", "5")
    assert Feature.QUEUES not in matrix.native_features("mqtt", "3.1.1")
    assert Feature.CONNECTION_FLOW_LIMIT not in matrix.native_features("stomp", "rabbitmq")
    assert MqttTransport.capabilities == frozenset()  # set per connection from the matrix


@pytest.fixture
def vm_rig(vm_broker_factory: Any) -> Rig:
    host, _ = vm_broker_factory()
    return Rig("vm", "embedded", f"vm://{host.name}")


@pytest.mark.parametrize("feature", list(Feature), ids=lambda f: f.name.lower())
def test_vm_cell_behaves_as_the_matrix_says(vm_rig: Rig, feature: Feature) -> None:
    check_cell(vm_rig, feature)


def test_a_cell_that_lies_fails_its_test(
    vm_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cell tests can fail: mark the browser refused on vm://, where it works, and the
    check of that cell fails."""
    import capability_probes

    lie = refused("pretend", "do something else")
    monkeypatch.setattr(capability_probes, "cell", lambda *a: lie)
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        check_cell(vm_rig, Feature.BROWSER)
