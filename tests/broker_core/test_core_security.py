"""Broker security in the core: authentication, per-action permissions with wildcards,
refusals that leave no trace, anonymous access, hashes and the [security] config table.

Hashes use few PBKDF2 rounds (``FAST``) so the suite stays quick; the default is checked
separately.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from core_support import Recorder, msg, tmsg

from jmspy.broker_ref.core import AccessDenied, Broker, DestinationKind, ServerConnection
from jmspy.broker_ref.core.errors import AuthenticationFailed
from jmspy.broker_ref.core.security import (
    DEFAULT_ITERATIONS,
    HASH_SCHEME,
    SecurityPolicy,
    hash_password,
    verify_password,
)
from jmspy.broker_ref.security_config import SecurityConfigError, parse_security
from jmspy.cli import main

FAST = 1_000
SECRET = "s3cret-Pa55"


def _policy(**kw: Any) -> SecurityPolicy:
    policy = SecurityPolicy(iterations=FAST, **kw)
    policy.add_user("alice", SECRET, roles=["traders"])
    policy.add_user("audrey", "audit-pw", roles=["auditors"])
    policy.add_user("root", "root-pw", roles=["admins"])
    policy.add_permission(
        "orders.#", "queue", send=["traders"], consume=["auditors"], browse=["auditors"]
    )
    policy.add_permission("prices.*", "topic", send=["traders"], consume=["traders"])
    policy.add_permission("#", admin=["admins"])
    return policy


@pytest.fixture
def secure() -> Broker:
    return Broker(security=_policy())


def _connect(broker: Broker, user: str | None, password: str | None, **kw: Any) -> ServerConnection:
    return broker.connect(Recorder(), user=user, password=password, **kw)


# ---------------------------------------------------------------------- authentication


def test_connection_without_credentials_is_rejected_when_security_is_on(secure: Broker) -> None:
    with pytest.raises(AuthenticationFailed, match="pass a user name and password"):
        _connect(secure, None, None)
    assert secure._connections == {}


def test_wrong_password_and_unknown_user_get_the_same_message(secure: Broker) -> None:
    with pytest.raises(AuthenticationFailed) as wrong:
        _connect(secure, "alice", "not-it")
    with pytest.raises(AuthenticationFailed) as unknown:
        _connect(secure, "mallory", "not-it")
    assert str(wrong.value) == str(unknown.value).replace("'mallory'", "'alice'")
    assert str(wrong.value).startswith("authentication failed for user 'alice'")
    assert "[security.users]" in str(wrong.value)  # says where to look


def test_correct_password_connects_with_the_users_roles(secure: Broker) -> None:
    conn = _connect(secure, "alice", SECRET)
    assert conn.principal is not None and conn.principal.roles == {"traders"}


def test_authentication_is_checked_before_the_client_id_is_revealed(secure: Broker) -> None:
    _connect(secure, "alice", SECRET, client_id="app")
    with pytest.raises(AuthenticationFailed):
        _connect(secure, "alice", "wrong", client_id="app")


def test_password_never_appears_in_errors_or_reprs(secure: Broker) -> None:
    policy = secure.security
    assert policy is not None
    texts = [repr(policy), repr(policy.users["alice"]), str(policy.users["alice"])]
    for attempt in (SECRET + "x", SECRET[:-1]):
        with pytest.raises(AuthenticationFailed) as err:
            _connect(secure, "alice", attempt)
        texts += [str(err.value), repr(err.value)]
    conn = _connect(secure, "alice", SECRET)
    with pytest.raises(AccessDenied) as denied:
        conn.browse("orders.eu")
    texts += [str(denied.value), repr(conn.principal)]
    stored = policy.users["alice"].password_hash
    for text in texts:
        assert SECRET[:6] not in text and stored not in text and "pbkdf2" not in text


def test_security_disabled_lets_everyone_do_everything() -> None:
    broker = Broker(security=_policy(enabled=False))
    conn = _connect(broker, None, None)
    conn.send(msg("anything", 1))
    conn.create_consumer(1, DestinationKind.QUEUE, "anything", credit=1)
    assert broker.stats("anything").message_count == 1
    assert [s.name for s in conn.all_stats()] == ["anything"]


def test_anonymous_connections_get_the_anonymous_roles() -> None:
    policy = _policy(allow_anonymous=True, anonymous_roles=["traders"])
    broker = Broker(security=policy)
    anon = _connect(broker, None, None)
    assert anon.principal is not None and anon.principal.anonymous
    anon.send(msg("orders.eu", 1))
    with pytest.raises(AccessDenied, match="an anonymous connection may not consume from"):
        anon.create_consumer(1, DestinationKind.QUEUE, "orders.eu")


def test_given_credentials_are_checked_even_when_anonymous_is_allowed() -> None:
    broker = Broker(security=_policy(allow_anonymous=True, anonymous_roles=["traders"]))
    with pytest.raises(AuthenticationFailed, match="for user 'alice'"):
        _connect(broker, "alice", "wrong")
    with pytest.raises(AuthenticationFailed, match="without a user name"):
        _connect(broker, None, SECRET)


# ---------------------------------------------------------------------- authorization


def test_permissions_are_per_action_with_wildcards(secure: Broker) -> None:
    alice = _connect(secure, "alice", SECRET)
    audrey = _connect(secure, "audrey", "audit-pw")
    alice.send(msg("orders.eu.fast", "a"))  # orders.# covers every depth
    with pytest.raises(AccessDenied):
        alice.create_consumer(1, DestinationKind.QUEUE, "orders.eu.fast")
    with pytest.raises(AccessDenied):
        alice.browse("orders.eu.fast")
    with pytest.raises(AccessDenied):
        audrey.send(msg("orders.eu.fast", "b"))
    assert [m.body for m in audrey.browse("orders.eu.fast")] == ["a"]
    audrey.create_consumer(1, DestinationKind.QUEUE, "orders.eu.fast", credit=1)
    with pytest.raises(AccessDenied):
        alice.send(msg("invoices", "c"))  # no pattern matches at all


def test_star_matches_exactly_one_word_and_kind_is_respected(secure: Broker) -> None:
    alice = _connect(secure, "alice", SECRET)
    alice.send(tmsg("prices.eur"))
    alice.create_consumer(1, DestinationKind.TOPIC, "prices.eur")
    with pytest.raises(AccessDenied):
        alice.send(tmsg("prices.eur.spot"))  # '*' is one word
    with pytest.raises(AccessDenied):
        alice.send(msg("prices.eur"))  # the grant is for the topic, not a queue
    with pytest.raises(AccessDenied):
        alice.send(tmsg("orders.eu"))  # and orders.# is for queues only


def test_denial_message_names_user_action_destination_roles_and_fix(secure: Broker) -> None:
    alice = _connect(secure, "alice", SECRET)
    with pytest.raises(AccessDenied) as err:
        alice.create_consumer(1, DestinationKind.QUEUE, "orders.eu")
    text = str(err.value)
    assert text.startswith("user 'alice' may not consume from queue 'orders.eu'")
    assert "[traders]" in text and "'consume'" in text
    assert "add a [[security.permissions]] entry" in text and "consume = [" in text


def test_denied_send_routes_nothing_and_creates_no_destination(secure: Broker) -> None:
    alice = _connect(secure, "alice", SECRET)
    audrey = _connect(secure, "audrey", "audit-pw")
    alice.send(msg("orders.eu", "first"))
    with pytest.raises(AccessDenied):
        audrey.send(msg("orders.eu", "sneaky"))
    with pytest.raises(AccessDenied):
        audrey.send(msg("orders.new", "sneaky"))
    with pytest.raises(AccessDenied):
        audrey.send(tmsg("prices.eur", "sneaky"))
    assert secure.queue_names() == ["orders.eu"] and secure.topic_names() == []
    assert [m.body for m in audrey.browse("orders.eu")] == ["first"]


def test_denied_send_in_a_transaction_stages_nothing(secure: Broker) -> None:
    audrey = _connect(secure, "audrey", "audit-pw")
    audrey.begin("tx1")
    with pytest.raises(AccessDenied):
        audrey.send(msg("orders.eu", "x"), "tx1")
    audrey.commit("tx1")
    assert secure.queue_names() == []


def test_denied_consumer_creates_no_consumer_queue_or_subscription(secure: Broker) -> None:
    audrey = _connect(secure, "audrey", "audit-pw", client_id="aud")
    with pytest.raises(AccessDenied):
        audrey.create_consumer(1, DestinationKind.QUEUE, "invoices")
    with pytest.raises(AccessDenied):
        audrey.create_consumer(
            2, DestinationKind.TOPIC, "prices.eur", subscription_name="s", durable=True
        )
    assert audrey.consumer_ids() == []
    assert secure.queue_names() == [] and secure.topic_names() == []
    assert secure.subscription_names() == []


def test_unsubscribe_needs_consume_on_the_subscriptions_topic() -> None:
    policy = _policy()
    broker = Broker(security=policy)
    alice = _connect(broker, "alice", SECRET, client_id="app")
    alice.create_consumer(
        1, DestinationKind.TOPIC, "prices.eur", subscription_name="s", durable=True
    )
    alice.close_consumer(1)
    policy.add_permission("prices.*", "topic", consume=["auditors"])
    alice.close()
    audrey = _connect(broker, "audrey", "audit-pw", client_id="app")
    audrey.unsubscribe("s")  # auditors now may consume prices.*
    alice = _connect(broker, "alice", SECRET, client_id="app2")
    alice.create_consumer(
        1, DestinationKind.TOPIC, "prices.eur", subscription_name="t", durable=True
    )
    alice.close()
    root = _connect(broker, "root", "root-pw", client_id="app2")
    with pytest.raises(AccessDenied, match=r"may not consume from topic 'prices\.eur'"):
        root.unsubscribe("t")
    assert len(broker.subscription_names()) == 1


def test_own_temporary_queue_is_free_others_need_temp_queue_send() -> None:
    policy = _policy()
    broker = Broker(security=policy)
    alice = _connect(broker, "alice", SECRET)
    audrey = _connect(broker, "audrey", "audit-pw")
    reply = audrey.create_temporary_queue()  # creating needs no permission
    audrey.create_consumer(1, DestinationKind.QUEUE, reply, credit=1)
    audrey.send(msg(reply, "self"))
    assert [m.body for m in audrey.browse(reply)] == []  # delivered already
    with pytest.raises(AccessDenied, match="temp-queue"):
        alice.send(msg(reply, "answer"))
    policy.add_permission("temp-queue.#", "queue", send=["traders"])
    alice.send(msg(reply, "answer"))
    with pytest.raises(AccessDenied):
        alice.create_consumer(1, DestinationKind.QUEUE, reply)  # never others' temp queues
    assert broker.stats(reply).enqueued == 2


def test_stats_through_a_connection_need_admin(secure: Broker) -> None:
    alice = _connect(secure, "alice", SECRET)
    root = _connect(secure, "root", "root-pw")
    alice.send(msg("orders.eu", 1))
    with pytest.raises(AccessDenied, match=r"may not administer queue 'orders\.eu'"):
        alice.stats("orders.eu")
    with pytest.raises(AccessDenied, match="may not read broker statistics"):
        alice.all_stats()
    assert root.stats("orders.eu").message_count == 1
    assert [s.name for s in root.all_stats()] == ["orders.eu"]
    assert secure.stats("orders.eu").message_count == 1  # in-process operators: unchecked


def test_all_stats_lists_only_destinations_the_user_may_administer() -> None:
    policy = _policy()
    policy.add_permission("orders.*", "queue", admin=["auditors"])
    broker = Broker(security=policy)
    alice = _connect(broker, "alice", SECRET)
    alice.send(msg("orders.eu", 1))
    alice.send(tmsg("prices.eur", 2))
    audrey = _connect(broker, "audrey", "audit-pw")
    assert [s.name for s in audrey.all_stats()] == ["orders.eu"]


# ---------------------------------------------------------------------- hashes


def test_hash_format_round_trips_and_salts_differ() -> None:
    first = hash_password("pw", iterations=FAST)
    scheme, rounds, salt, digest = first.split("$")
    assert (scheme, rounds) == (HASH_SCHEME, str(FAST)) and salt and digest
    assert verify_password("pw", first) and not verify_password("pW", first)
    assert hash_password("pw", iterations=FAST) != first  # fresh salt each time
    assert DEFAULT_ITERATIONS >= 100_000


def test_malformed_hash_is_refused_without_quoting_it() -> None:
    bad = "pbkdf2_sha256$x$abc$def"
    with pytest.raises(ValueError, match="malformed password hash") as err:
        verify_password("pw", bad)
    assert bad not in str(err.value)
    with pytest.raises(ValueError):
        SecurityPolicy().add_user("bob", password_hash="md5$1$2$3")


def test_hash_password_cli_prints_a_verifiable_hash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("hunter2\n"))  # a pipe: one line, no echo
    assert main(["hash-password", "--iterations", str(FAST)]) == 0
    printed = capsys.readouterr().out.strip()
    assert verify_password("hunter2", printed) and "hunter2" not in printed


# ---------------------------------------------------------------------- config


EXAMPLE: dict[str, Any] = {
    "enabled": True,
    "allow-anonymous": False,
    "users": {
        "alice": {"password": SECRET, "roles": ["traders"]},
        "audrey": {"password-hash": hash_password("audit-pw", iterations=FAST)},
    },
    "groups": {"auditors": ["audrey"], "order_admins": ["alice"]},
    "permissions": [
        {"match": "orders.#", "kind": "queue", "send": ["traders"], "browse": ["auditors"]},
        {"match": "#", "admin": ["order_admins"]},
    ],
}


def test_parse_security_builds_a_working_policy_without_keeping_plaintext() -> None:
    policy = parse_security(EXAMPLE, "broker.toml", iterations=FAST)
    assert policy.enabled and not policy.allow_anonymous
    assert policy.users["alice"].roles == {"traders", "order_admins"}
    assert policy.users["audrey"].roles == {"auditors"}
    assert SECRET not in policy.users["alice"].password_hash
    assert policy.permissions[0].kind == "queue" and policy.permissions[1].kind == "*"
    broker = Broker(security=policy)
    alice = _connect(broker, "alice", SECRET)
    alice.send(msg("orders.eu", 1))
    audrey = _connect(broker, "audrey", "audit-pw")
    assert len(audrey.browse("orders.eu")) == 1
    assert alice.stats("orders.eu").message_count == 1


def test_parse_security_accepts_underscores_and_defaults_to_enabled() -> None:
    policy = parse_security({"allow_anonymous": True, "anonymous_roles": ["guests"]}, "b.toml")
    assert policy.enabled and policy.allow_anonymous and policy.anonymous_roles == {"guests"}


@pytest.mark.parametrize(
    ("table", "key", "path", "says"),
    [
        ({"enable": True}, "enable", "security", "valid keys: enabled, allow-anonymous"),
        ({"enabled": "yes"}, "enabled", "security", "expected true or false"),
        ({"users": {"bob": {"pasword": "x"}}}, "pasword", "security.users.bob", "valid keys"),
        ({"users": {"bob": "x"}}, "bob", "security.users", "expected a table"),
        ({"users": {"bob": {"roles": ["r"]}}}, "password", "security.users.bob", "exactly one"),
        (
            {"users": {"bob": {"password": "x", "password-hash": "y"}}},
            "password",
            "security.users.bob",
            "exactly one",
        ),
        (
            {"users": {"bob": {"password-hash": "nope"}}},
            "password-hash",
            "security.users.bob",
            "malformed password hash",
        ),
        (
            {"users": {"bob": {"password": "x", "roles": "admins"}}},
            "roles",
            "security.users.bob",
            "list of non-empty strings",
        ),
        ({"groups": {"ops": ["nobody"]}}, "ops", "security.groups", "unknown user 'nobody'"),
        ({"permissions": {"match": "a"}}, "permissions", "security", "array of tables"),
        ({"permissions": [{"send": ["r"]}]}, "match", "security.permissions[0]", "required"),
        (
            {"permissions": [{"match": "a", "kind": "queues", "send": ["r"]}]},
            "kind",
            "security.permissions[0]",
            "queue, topic, *",
        ),
        (
            {"permissions": [{"match": "a..b", "send": ["r"]}]},
            "match",
            "security.permissions[0]",
            "must not be empty",
        ),
        ({"permissions": [{"match": "a"}]}, "match", "security.permissions[0]", "grants nothing"),
        (
            {"permissions": [{"match": "a", "sned": ["r"]}]},
            "sned",
            "security.permissions[0]",
            "valid keys: match, kind, send, consume, browse, admin",
        ),
    ],
)
def test_parse_security_errors_name_key_table_and_file(
    table: dict[str, Any], key: str, path: str, says: str
) -> None:
    with pytest.raises(SecurityConfigError) as err:
        parse_security(table, "conf/broker.toml", iterations=FAST)
    text = str(err.value)
    assert text.startswith(f"conf/broker.toml: [{path}] {key!r}:"), text
    assert says in text, text
    assert (err.value.key, err.value.path, err.value.source) == (key, path, "conf/broker.toml")
    assert isinstance(err.value, ValueError)


def test_parse_security_errors_never_quote_passwords() -> None:
    with pytest.raises(SecurityConfigError) as err:
        parse_security({"users": {"bob": {"password": SECRET, "password-hash": "h"}}}, "b.toml")
    assert SECRET not in str(err.value)


# ---------------------------------------------------------------------- identity


@pytest.mark.parametrize("forged", [None, "bob", 42])
def test_broker_stamps_jmsxuserid_with_the_authenticated_user_over_a_forged_one(
    secure: Broker, forged: Any
) -> None:
    alice = _connect(secure, "alice", SECRET)
    audrey = _connect(secure, "audrey", "audit-pw")
    rec = audrey.callback
    audrey.create_consumer(1, DestinationKind.QUEUE, "orders.id", credit=10)
    props = {"region": "EU"} if forged is None else {"JMSXUserID": forged, "region": "EU"}
    sent = msg("orders.id", "x", properties=props)
    alice.send(sent)
    alice.begin("t")
    alice.send(msg("orders.id", "in-tx", properties=dict(props)), "t")
    alice.commit("t")
    got = [d.message.properties for d in rec.take()]
    assert got == [{"region": "EU", "JMSXUserID": "alice"}] * 2
    assert props.get("JMSXUserID") == forged  # the sender's dict is not rewritten


def test_anonymous_senders_jmsxuserid_is_removed_not_trusted() -> None:
    broker = Broker(security=_policy(allow_anonymous=True, anonymous_roles=["traders"]))
    anon = _connect(broker, None, None)
    audrey = _connect(broker, "audrey", "audit-pw")
    audrey.create_consumer(1, DestinationKind.QUEUE, "orders.anon", credit=10)
    anon.send(msg("orders.anon", "x", properties={"JMSXUserID": "alice", "k": 1}))
    (d,) = audrey.callback.take()
    assert d.message.properties == {"k": 1}


def test_disabled_policy_leaves_jmsxuserid_as_sent() -> None:
    broker = Broker(security=_policy(enabled=False))
    conn = _connect(broker, "alice", SECRET)
    conn.create_consumer(1, DestinationKind.QUEUE, "q", credit=10)
    conn.send(msg("q", "x", properties={"JMSXUserID": "whoever"}))
    (d,) = conn.callback.take()
    assert d.message.properties == {"JMSXUserID": "whoever"}


# ---------------------------------------------------------------------- durable subscriptions


def _bob_and_mallory() -> tuple[Broker, SecurityPolicy]:
    policy = _policy()
    policy.add_user("bob", "bob-pw", roles=["bobs"])
    policy.add_user("mallory", "mal-pw", roles=["public"])
    policy.add_permission("secret.bob", "topic", send=["bobs"], consume=["bobs"])
    policy.add_permission("public.*", "topic", send=["public"], consume=["public"])
    return Broker(security=policy), policy


@pytest.mark.parametrize(
    ("topic", "selector"), [("public.x", None), ("public.x", "a = 1")]
)
def test_durable_subscription_cannot_be_replaced_without_consume_on_its_topic(
    topic: str, selector: str | None
) -> None:
    broker, _ = _bob_and_mallory()
    bob = _connect(broker, "bob", "bob-pw", client_id="bob")
    bob.create_consumer(1, DestinationKind.TOPIC, "secret.bob", subscription_name="s",
                        durable=True)
    bob.close()
    sender = _connect(broker, "bob", "bob-pw")
    sender.send(tmsg("secret.bob", "salary"))
    mallory = _connect(broker, "mallory", "mal-pw", client_id="bob")
    with pytest.raises(AccessDenied, match=r"may not consume from topic 'secret\.bob'"):
        mallory.create_consumer(1, DestinationKind.TOPIC, topic, subscription_name="s",
                                durable=True, selector=selector)
    with pytest.raises(AccessDenied, match=r"may not consume from topic 'secret\.bob'"):
        mallory.unsubscribe("s")
    assert mallory.consumer_ids() == []
    mallory.close()
    # bob's subscription and the message it kept are intact
    bob = _connect(broker, "bob", "bob-pw", client_id="bob")
    bob.create_consumer(1, DestinationKind.TOPIC, "secret.bob", subscription_name="s",
                        durable=True, credit=10)
    assert bob.callback.bodies() == ["salary"]


def test_durable_subscription_is_replaced_by_a_user_who_may_consume_its_topic() -> None:
    broker, policy = _bob_and_mallory()
    policy.add_permission("public.*", "topic", consume=["bobs"])
    bob = _connect(broker, "bob", "bob-pw", client_id="bob")
    bob.create_consumer(1, DestinationKind.TOPIC, "secret.bob", subscription_name="s",
                        durable=True)
    bob.close()
    _connect(broker, "bob", "bob-pw").send(tmsg("secret.bob", "old"))
    bob = _connect(broker, "bob", "bob-pw", client_id="bob")
    bob.create_consumer(1, DestinationKind.TOPIC, "public.x", subscription_name="s",
                        durable=True, credit=10)
    assert bob.callback.bodies() == []  # the JMS rule: a changed subscription starts anew
    assert len(broker.subscription_names()) == 1


# ---------------------------------------------------------------------- wildcard subscriptions


def _staff_and_hr(grant: str) -> Broker:
    """``staff`` may consume topics matching ``grant``; ``hr`` may consume every topic;
    ``boss`` sends everywhere."""
    policy = _policy()
    policy.add_user("sam", "sam-pw", roles=["staff"])
    policy.add_user("hana", "hana-pw", roles=["hr"])
    policy.add_user("boss", "boss-pw", roles=["boss"])
    policy.add_permission(grant, "topic", consume=["staff"])
    policy.add_permission("#", "topic", send=["boss"], consume=["hr"])
    return Broker(security=policy)


@pytest.mark.parametrize(
    ("grant", "pattern", "allowed", "forbidden"),
    [
        ("public.*", "public.#", "public.news", "public.internal.salaries"),
        ("public.*", "public.>", "public.news", "public.internal.salaries"),
        ("*.*", "*.#", "public.news", "public.internal.salaries"),
        ("*.salaries", "#.salaries", "hr.salaries", "public.internal.salaries"),
        ("*.news", "#.news", "eu.news", "eu.internal.news"),
    ],
)
def test_wildcard_subscription_delivers_only_topics_the_subscriber_may_consume(
    grant: str, pattern: str, allowed: str, forbidden: str
) -> None:
    broker = _staff_and_hr(grant)
    sam = _connect(broker, "sam", "sam-pw")
    hana = _connect(broker, "hana", "hana-pw")
    boss = _connect(broker, "boss", "boss-pw")
    sam.create_consumer(1, DestinationKind.TOPIC, pattern, credit=10)
    hana.create_consumer(1, DestinationKind.TOPIC, forbidden, credit=10)
    for _ in range(2):  # the second time from the per-subscription decision cache
        boss.send(tmsg(forbidden, "secret"))
        boss.send(tmsg(allowed, "open"))
    assert sam.callback.bodies() == ["open", "open"]
    assert hana.callback.bodies() == ["secret", "secret"]


def test_shared_wildcard_subscription_delivers_what_every_attached_user_may_consume() -> None:
    broker = _staff_and_hr("public.*")
    hana = _connect(broker, "hana", "hana-pw")
    sam = _connect(broker, "sam", "sam-pw")
    boss = _connect(broker, "boss", "boss-pw")
    hana.create_consumer(1, DestinationKind.TOPIC, "public.#", subscription_name="all",
                         shared=True, credit=10)
    boss.send(tmsg("public.internal.salaries", "before sam"))
    sam.create_consumer(1, DestinationKind.TOPIC, "public.#", subscription_name="all",
                        shared=True, credit=10)
    boss.send(tmsg("public.internal.salaries", "while sam shares"))
    boss.send(tmsg("public.news", "news"))
    got = hana.callback.bodies() + sam.callback.bodies()
    assert sorted(got) == ["before sam", "news"]
