"""Broker security: who may connect, and what each connection may do where.

Everything here is plain data and pure functions, so the core stays sans-I/O and a host
(``vm://``, the STOMP server) gets security by passing ``Broker(security=policy)``.

**Authentication.** Users carry a PBKDF2-HMAC-SHA256 hash (``hashlib``, 16 random salt
bytes per user, :data:`DEFAULT_ITERATIONS` rounds) in the text form
``pbkdf2_sha256$<iterations>$<base64 salt>$<base64 hash>`` — the form Django uses, so
hashes are portable and can be produced offline with
``jmspy hash-password``. Plaintext passwords in a
config file are hashed when the file is loaded and never kept. Verification uses
:func:`hmac.compare_digest`, and an unknown user is checked against a dummy hash of the
same cost, so neither the answer nor (roughly) the time tells a client which user names
exist. A refusal always reads ``authentication failed for user '<name>'``.

**Anonymous access.** A connection without a user name is refused unless
``allow_anonymous`` is set; it then gets ``anonymous_roles``. Credentials that *are*
given are always checked: a wrong password is never downgraded to anonymous access.

**Authorization.** A permission is (destination pattern, kind, action -> roles) with the
patterns of :mod:`.settings` (``.`` separates words, ``*`` one word, ``#``/``>`` the rest).
An action is allowed when ANY permission whose pattern and kind match lists one of the
connection's roles for it. There are no deny rules and no "most specific wins": a union
of grants does not depend on the order of entries, so reordering a config file can never
open or close a hole by accident. Actions:

* ``send`` — send to a queue, or publish to a topic;
* ``consume`` — consume from a queue, subscribe to a topic (durable and shared
  subscriptions included), and delete (unsubscribe) a durable subscription of the topic;
* ``browse`` — browse a queue;
* ``admin`` — read destination statistics through a connection
  (``ServerConnection.stats``/``all_stats``). ``Broker.stats`` itself stays unchecked: it
  is for in-process operators, who own the broker object anyway.

**Identity.** With the policy enabled, every message the broker accepts carries the
sender's authenticated user name in ``JMSXUserID`` (ActiveMQ's ``populateJMSXUserID``),
written by the broker over whatever the sender set; an anonymous sender's message carries
none. A consumer may therefore trust the property.

**Temporary queues.** Any authenticated connection may create them (request/reply must not
need configuration). The creating connection may always send to, consume from and browse
its own. Another connection needs ``send`` on the permission name ``temp-queue.<id>`` —
grant it with ``match = "temp-queue.#"`` — and may never consume or browse it.

**Disabled policy.** ``enabled = false`` checks nothing at all (users and permissions may
stay configured), which equals running without a policy.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from .api import TEMP_PREFIX, DestinationKind, DestinationStats, ServerMessage
from .errors import AccessDenied, AuthenticationFailed
from .settings import pattern_matches

__all__ = [
    "ACTIONS",
    "DEFAULT_ITERATIONS",
    "HASH_SCHEME",
    "KINDS",
    "TEMP_QUEUE_PERMISSION_PREFIX",
    "USER_ID_PROPERTY",
    "Action",
    "Permission",
    "PermissionKind",
    "Principal",
    "SecurityPolicy",
    "User",
    "check_pattern",
    "hash_password",
    "permission_name",
    "verify_password",
]

Action = Literal["send", "consume", "browse", "admin"]
PermissionKind = Literal["queue", "topic", "*"]
ACTIONS: Final[tuple[Action, ...]] = ("send", "consume", "browse", "admin")
KINDS: Final[tuple[PermissionKind, ...]] = ("queue", "topic", "*")

HASH_SCHEME: Final = "pbkdf2_sha256"
#: PBKDF2 rounds for new hashes. OWASP asks for far more, but every connect pays this
#: cost on the broker's single thread; 200k is ~0.1 s in CPython's C implementation.
DEFAULT_ITERATIONS: Final = 200_000
_SALT_BYTES: Final = 16
#: Temporary queues are checked under ``temp-queue.<id>`` so one pattern covers them all.
TEMP_QUEUE_PERMISSION_PREFIX: Final = "temp-queue."
_CACHE_LIMIT: Final = 4096

_VERBS: Final[Mapping[Action, str]] = {
    "send": "send to",
    "consume": "consume from",
    "browse": "browse",
    "admin": "administer",
}


# ---------------------------------------------------------------------- password hashing


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(
    plain: str, *, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> str:
    """``pbkdf2_sha256$<iterations>$<salt>$<hash>`` for ``plain``, with a fresh random salt
    unless one is given (only tests should give one)."""
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    salt = secrets.token_bytes(_SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha256", plain.encode("utf-8"), salt, iterations)
    return f"{HASH_SCHEME}${iterations}${_b64(salt)}${_b64(digest)}"


def _parse_hash(encoded: str) -> tuple[int, bytes, bytes]:
    """Split a stored hash; the error never quotes it (a hash is a secret too)."""
    parts = encoded.split("$")
    try:
        if len(parts) != 4 or parts[0] != HASH_SCHEME:
            raise ValueError
        iterations = int(parts[1])
        salt = base64.b64decode(parts[2], validate=True)
        digest = base64.b64decode(parts[3], validate=True)
        if iterations < 1 or not salt or not digest:
            raise ValueError
    except (ValueError, binascii.Error):
        raise ValueError(
            f"malformed password hash: expected '{HASH_SCHEME}$<iterations>$<base64 salt>"
            "$<base64 hash>' as printed by 'jmspy hash-password'"
        ) from None
    return iterations, salt, digest


def verify_password(plain: str, encoded: str) -> bool:
    """True when ``plain`` matches ``encoded``; compares in constant time."""
    iterations, salt, expected = _parse_hash(encoded)
    digest = hashlib.pbkdf2_hmac(
        "sha256", plain.encode("utf-8"), salt, iterations, dklen=len(expected)
    )
    return hmac.compare_digest(digest, expected)


# ---------------------------------------------------------------------- policy data


@dataclass(frozen=True, slots=True)
class User:
    """A configured user. ``password_hash`` is left out of ``repr`` so logging a user (or
    the policy) cannot leak material for an offline attack."""

    name: str
    password_hash: str = field(repr=False)
    roles: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection is, once authenticated: ``user`` is None for anonymous access."""

    user: str | None
    roles: frozenset[str] = frozenset()

    @property
    def anonymous(self) -> bool:
        return self.user is None

    def describe(self) -> str:
        return "an anonymous connection" if self.user is None else f"user {self.user!r}"


def check_pattern(pattern: str) -> None:
    if not pattern or any(not w for w in pattern.split(".")):
        raise ValueError(
            f"invalid permission pattern {pattern!r}: words separated by '.' must not be "
            "empty (use '*' for one word, '#' for any number)"
        )


@dataclass(frozen=True, slots=True)
class Permission:
    """Roles allowed each action on destinations of ``kind`` whose name matches ``match``."""

    match: str
    kind: PermissionKind = "*"
    send: frozenset[str] = frozenset()
    consume: frozenset[str] = frozenset()
    browse: frozenset[str] = frozenset()
    admin: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        check_pattern(self.match)
        if self.kind not in KINDS:
            raise ValueError(
                f"permission kind must be one of {', '.join(KINDS)}; got {self.kind!r}"
            )

    def roles_for(self, action: Action) -> frozenset[str]:
        roles: frozenset[str] = getattr(self, action)
        return roles

    def applies(self, kind: DestinationKind, name: str) -> bool:
        """``name`` is the permission name (see :func:`permission_name`)."""
        return (self.kind == "*" or self.kind == kind.value) and pattern_matches(self.match, name)


def permission_name(kind: DestinationKind, name: str) -> str:
    """The name permissions are matched against: temporary queues (``temp-queue://3-1``)
    become ``temp-queue.3-1`` so ``temp-queue.#`` can cover them."""
    if kind is DestinationKind.QUEUE and name.startswith(TEMP_PREFIX):
        return TEMP_QUEUE_PERMISSION_PREFIX + name[len(TEMP_PREFIX) :]
    return name


#: The JMS-defined property naming the sending user; the broker owns it (see
#: :meth:`SecurityPolicy.stamp_identity`).
USER_ID_PROPERTY: Final = "JMSXUserID"


class SecurityPolicy:
    """Users, roles and permissions; the broker asks it at connect and on every action.

    Build one in code (``add_user``/``add_permission``) or from config with
    ``jmspy.broker_ref.security_config.parse_security``. Not thread-safe, like the rest of
    the core.
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        users: Iterable[User] = (),
        permissions: Iterable[Permission] = (),
        allow_anonymous: bool = False,
        anonymous_roles: Iterable[str] = (),
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        self.enabled = enabled
        self.allow_anonymous = allow_anonymous
        self.anonymous_roles = frozenset(anonymous_roles)
        #: rounds used for passwords added as plaintext, and for the unknown-user dummy
        self.iterations = iterations
        self.users: dict[str, User] = {u.name: u for u in users}
        self._permissions: list[Permission] = list(permissions)
        self._dummy_hash: str | None = None
        self._cache: dict[tuple[frozenset[str], Action, DestinationKind, str], bool] = {}

    def __repr__(self) -> str:
        return (
            f"SecurityPolicy(enabled={self.enabled}, users={sorted(self.users)}, "
            f"permissions={len(self._permissions)}, allow_anonymous={self.allow_anonymous})"
        )

    @property
    def permissions(self) -> Sequence[Permission]:
        return tuple(self._permissions)

    # -- building

    def add_user(
        self,
        name: str,
        password: str | None = None,
        *,
        password_hash: str | None = None,
        roles: Iterable[str] = (),
        iterations: int | None = None,
    ) -> User:
        """Add or replace a user from a plaintext password (hashed now, not kept) or a
        ready hash. Exactly one of the two."""
        if not name:
            raise ValueError("a user name must not be empty")
        if (password is None) == (password_hash is None):
            raise ValueError(f"user {name!r}: give exactly one of password or password_hash")
        if password is not None:
            if not password:
                raise ValueError(f"user {name!r}: the password must not be empty")
            password_hash = hash_password(password, iterations=iterations or self.iterations)
        assert password_hash is not None
        _parse_hash(password_hash)  # fail at load time, not at the first connect
        user = User(name, password_hash, frozenset(roles))
        self.users[name] = user
        return user

    def add_permission(
        self,
        match: str,
        kind: PermissionKind = "*",
        *,
        send: Iterable[str] = (),
        consume: Iterable[str] = (),
        browse: Iterable[str] = (),
        admin: Iterable[str] = (),
    ) -> Permission:
        perm = Permission(
            match,
            kind,
            frozenset(send),
            frozenset(consume),
            frozenset(browse),
            frozenset(admin),
        )
        self._permissions.append(perm)
        self._cache.clear()
        return perm

    # -- authentication

    def authenticate(self, user: str | None, password: str | None) -> Principal:
        """The principal for these credentials, or :class:`AuthenticationFailed`.

        With the policy disabled nothing is checked and the principal has no roles.
        """
        if not self.enabled:
            return Principal(user or None)
        if not user:
            if password:
                raise AuthenticationFailed(
                    "authentication failed: a password was given without a user name; pass "
                    "both user and password when connecting"
                )
            if self.allow_anonymous:
                return Principal(None, self.anonymous_roles)
            raise AuthenticationFailed(
                "authentication required: this broker has security enabled and does not "
                "accept anonymous connections; pass a user name and password when "
                "connecting (jmspy: create_connection(user, password); STOMP: the login "
                "and passcode headers of CONNECT)"
            )
        record = self.users.get(user)
        if self._dummy_hash is None:  # made before any check, so every check costs the same
            self._dummy_hash = hash_password(secrets.token_hex(16), iterations=self.iterations)
        encoded = record.password_hash if record is not None else self._dummy_hash
        matched = verify_password(password or "", encoded)
        if record is None or not matched:
            raise AuthenticationFailed(
                f"authentication failed for user {user!r}: unknown user or wrong password; "
                "check the credentials the client connects with against the broker's "
                "[security.users] configuration"
            )
        return Principal(user, record.roles)

    def authenticate_certificate(self, user: str, login: str | None) -> Principal:
        """The principal for a client whose verified TLS certificate names ``user``
        (Mosquitto's ``use_identity_as_username``, ActiveMQ's certificate login): no
        password, since the CA vouched for the name; the user must be configured, for
        its roles. ``login`` (the CONNECT's login header), when given, must be that name:
        a client cannot borrow its certificate to act as someone else."""
        if not self.enabled:
            return Principal(user)
        if login and login != user:
            raise AuthenticationFailed(
                f"authentication failed: the client certificate names user {user!r} but "
                f"CONNECT asks for {login!r}; leave the login header out (the certificate "
                "logs in) or connect with the certificate of that user")
        record = self.users.get(user)
        if record is None:
            raise AuthenticationFailed(
                f"authentication failed: the client certificate names user {user!r}, who "
                "is not in the broker's [security.users]; add that user (with its roles) "
                "or connect with another certificate")
        return Principal(user, record.roles)

    # -- authorization

    def may_consume_topic(self, principal: Principal | None, topic: str) -> bool:
        """The question a wildcard subscription asks per concrete topic (see
        ``Subscription.admits``)."""
        return self.allows(principal, "consume", DestinationKind.TOPIC, topic)

    def allows(
        self, principal: Principal | None, action: Action, kind: DestinationKind, name: str
    ) -> bool:
        """True when some permission grants ``action`` on ``name`` to one of the roles."""
        if not self.enabled:
            return True
        if principal is None:  # connected before security was switched on
            return False
        key = (principal.roles, action, kind, name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        pname = permission_name(kind, name)
        roles = principal.roles
        result = any(
            p.applies(kind, pname) and not roles.isdisjoint(p.roles_for(action))
            for p in self._permissions
        )
        if len(self._cache) >= _CACHE_LIMIT:  # temp queue names would grow it forever
            self._cache.clear()
        self._cache[key] = result
        return result

    def authorize(
        self, principal: Principal | None, action: Action, kind: DestinationKind, name: str
    ) -> None:
        """Raise :class:`AccessDenied` (saying how to fix it) unless :meth:`allows`."""
        if self.allows(principal, action, kind, name):
            return
        if principal is None:
            raise AccessDenied(
                f"this connection was never authenticated and may not {_VERBS[action]} "
                f"{kind.value} {name!r}; reconnect with a user name and password"
            )
        roles = ", ".join(sorted(principal.roles)) or "none"
        pname = permission_name(kind, name)
        who = principal.describe()
        also = (
            "or connect with a user that has such a role"
            if principal.anonymous
            else "or give the user such a role"
        )
        raise AccessDenied(
            f"{who} may not {_VERBS[action]} {kind.value} {name!r}: no permission grants "
            f"{action!r} to any of its roles [{roles}] — add a [[security.permissions]] "
            f"entry whose match covers {pname!r} (kind = {kind.value!r} or '*') with "
            f"{action} = [one of those roles], {also}"
        )

    def visible_stats(
        self, principal: Principal | None, stats: Iterable[DestinationStats]
    ) -> list[DestinationStats]:
        """The stats the principal may administer; AccessDenied when it may administer
        nothing at all (an empty list would hide a missing grant)."""
        if not self.enabled:
            return list(stats)
        if principal is None or not any(
            not principal.roles.isdisjoint(p.admin) for p in self._permissions
        ):
            who = "this connection" if principal is None else principal.describe()
            raise AccessDenied(
                f"{who} may not read broker statistics: no permission grants 'admin' to any "
                "of its roles — add a [[security.permissions]] entry with admin = [a role "
                "it has]"
            )
        return [s for s in stats if self.allows(principal, "admin", s.kind, s.name)]

    def stamp_identity(self, principal: Principal | None, message: ServerMessage) -> None:
        """Write the authenticated user into ``JMSXUserID`` (ActiveMQ's
        ``populateJMSXUserID``), overwriting whatever the sender put there: with security on
        a consumer may trust the property. An anonymous sender has no identity to stamp, so
        a forged value is removed. A fresh dict: on ``vm://`` the properties may still be
        the producer's own."""
        if not self.enabled:
            return
        user = principal.user if principal is not None else None
        props = message.properties
        if user is None:
            if USER_ID_PROPERTY in props:
                message.properties = {
                    k: v for k, v in props.items() if k != USER_ID_PROPERTY
                }
        elif props.get(USER_ID_PROPERTY) != user:
            message.properties = {**props, USER_ID_PROPERTY: user}
