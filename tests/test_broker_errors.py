"""Refusals of jmspy's broker become JMS exceptions: in process by the core exception's
class (transports/vm_errors.py), over STOMP by the code jmspy broker names in the ERROR
frame's ``jmspy-error`` header (transports/broker_errors.py, codes from jmspy.wire); only
foreign brokers' ERROR texts are classified by their words."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from jmspy import _speedups, errors
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.core import errors as core
from jmspy.broker_ref.protocols.stomp.protocol import StompSession
from jmspy.transports.broker_errors import BY_CODE, class_for_code
from jmspy.transports.stomp.receipts import refusal
from jmspy.transports.vm_errors import BY_CLASS, translate
from jmspy.wire import error_codes

_codec: Any = _speedups.load("stomp_codec")

CORE_ERRORS = [
    cls for _, cls in inspect.getmembers(core, inspect.isclass)
    if issubclass(cls, core.BrokerError)
]


def test_every_broker_error_class_has_a_jms_class_and_its_own_code() -> None:
    assert set(CORE_ERRORS) <= set(BY_CLASS)
    assert len({cls.code for cls in CORE_ERRORS}) == len(CORE_ERRORS)
    assert all(BY_CODE[cls.code] is BY_CLASS[cls] for cls in CORE_ERRORS)


def test_the_wire_codes_are_exactly_the_core_classes_codes_and_the_client_maps_each() -> None:
    assert {cls.code for cls in CORE_ERRORS} == error_codes.CODES == set(BY_CODE)


def test_in_process_translation_goes_by_class_and_its_bases() -> None:
    class Vanished(core.DestinationNotFound):  # a name the table has never seen
        pass

    assert type(translate(Vanished("gone"))) is errors.InvalidDestinationException
    assert type(translate(core.AccessDenied("no"))) is errors.JMSSecurityException
    assert str(translate(core.ResourceLimitExceeded("full"))) == "full"
    assert type(translate(ValueError("odd"))) is errors.JMSException


def test_a_coded_refusal_maps_by_code_whatever_its_text_says() -> None:
    # text that the foreign-broker heuristics would call a security refusal
    exc = refusal("b:1", "the send", {"message": "permission", "jmspy-error":
                                      core.ResourceLimitExceeded.code}, "permission quota")
    assert type(exc) is errors.ResourceAllocationException
    foreign = refusal("b:1", "the send", {"message": "User x is not authorized"}, "")
    assert type(foreign) is errors.JMSSecurityException
    assert class_for_code(None) is None and class_for_code("NO_SUCH_CODE") is None


def test_jmspy_broker_names_the_refusing_errors_code_in_the_error_frame() -> None:
    session = StompSession(Broker())
    session.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
    session.receive_data(b"SUBSCRIBE\ndestination:/queue/q\nid:1\nselector:a = = 1\n\n\0")
    parser = _codec.FrameParser("1.2", None, False)
    parser.feed(session.data_to_send())
    frames = list(iter(parser.next_frame, None))
    assert [f.command for f in frames] == ["CONNECTED", "ERROR"]
    code = frames[1].header("jmspy-error")
    assert code == core.SelectorError.code  # the core refused the selector
    assert class_for_code(code) is errors.InvalidSelectorException


@pytest.mark.parametrize("cls", CORE_ERRORS, ids=lambda c: c.__name__)
def test_each_code_reaches_the_same_class_as_the_class_itself(cls: type) -> None:
    assert class_for_code(cls.code) is type(translate(cls("x")))
