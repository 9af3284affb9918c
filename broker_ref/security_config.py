"""The ``[security]`` table of a broker config file, turned into a SecurityPolicy.

Configuration, not policy: the broker core (:mod:`.core.security`) decides who may do
what and hashes passwords; this module only reads and checks the TOML table, naming the
key, table and file of every mistake.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NoReturn

from jmspy.errors import InvalidConfigurationException

from .core.security import (
    ACTIONS,
    DEFAULT_ITERATIONS,
    KINDS,
    SecurityPolicy,
    User,
    check_pattern,
)

__all__ = ["SecurityConfigError", "parse_security"]


class SecurityConfigError(InvalidConfigurationException, ValueError):
    """A [security] table is wrong. ``key``, ``path`` and ``source`` say where."""

    def __init__(self, problem: str, *, key: str, path: str, source: str) -> None:
        super().__init__(f"{source}: [{path}] {key!r}: {problem}")
        self.key = key
        self.path = path
        self.source = source


_TOP_KEYS: Final = ("enabled", "allow-anonymous", "anonymous-roles", "users", "groups",
                    "permissions")  # fmt: skip
_USER_KEYS: Final = ("password", "password-hash", "roles")
_PERM_KEYS: Final = ("match", "kind", *ACTIONS)


class _Reader:
    """Type-checked access to one table; every error names key, table path and file."""

    def __init__(
        self, table: Any, path: str, source: str, valid: Sequence[str], *, normalize: bool = True
    ) -> None:
        self.path, self.source, self.valid = path, source, valid
        if not isinstance(table, Mapping):
            parent, _, key = path.rpartition(".")
            raise SecurityConfigError(
                f"expected a table, got {type(table).__name__}",
                key=key,
                path=parent or path,
                source=source,
            )
        self.values: dict[str, Any] = {}
        for raw, value in table.items():
            key = str(raw)
            if normalize:  # accept allow_anonymous as allow-anonymous
                key = key.replace("_", "-")
            if key not in valid:
                self.fail(raw, f"unknown key; valid keys: {', '.join(valid)}")
            if key in self.values:
                self.fail(raw, "given twice (once with '-' and once with '_')")
            self.values[key] = value

    def fail(self, key: str, problem: str) -> NoReturn:
        raise SecurityConfigError(problem, key=key, path=self.path, source=self.source)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.values.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {type(value).__name__} {value!r}")
        return bool(value)

    def string(self, key: str, *, required: bool = False) -> str | None:
        value = self.values.get(key)
        if value is None:
            if required:
                self.fail(key, f"missing (required); valid keys: {', '.join(self.valid)}")
            return None
        if not isinstance(value, str) or not value:
            self.fail(key, f"expected a non-empty string, got {type(value).__name__}")
        return str(value)

    def strings(self, key: str) -> list[str]:
        value = self.values.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(key, 'expected a list of non-empty strings, e.g. ["traders"]')
        return list(value)


def parse_security(
    table: Mapping[str, Any], source: str, *, iterations: int = DEFAULT_ITERATIONS
) -> SecurityPolicy:
    """Build a :class:`SecurityPolicy` from the ``[security]`` table of a TOML config.

    ``source`` names the file in error messages; ``iterations`` is the PBKDF2 cost used to
    hash plaintext passwords now (tests lower it). Keys may use ``-`` or ``_``. Example::

        [security]
        enabled = true                  # default true once [security] exists
        allow-anonymous = false         # default false
        anonymous-roles = ["guests"]    # roles of connections without a user name

        [security.users.alice]
        password = "secret"             # hashed at load, never kept; or:
        # password-hash = "pbkdf2_sha256$200000$<base64 salt>$<base64 hash>"
        roles = ["traders"]

        [security.groups]               # optional: role -> users, added to their roles
        auditors = ["alice"]

        [[security.permissions]]
        match = "orders.#"              # settings wildcards: '*' one word, '#'/'>' the rest
        kind = "queue"                  # queue | topic | *   (default *)
        send = ["traders"]
        consume = ["traders", "auditors"]
        browse = ["auditors"]
        admin = ["admins"]

        [[security.permissions]]        # let everyone reply to others' temporary queues
        match = "temp-queue.#"
        send = ["traders", "auditors"]

    Roles are free-form names (a role no user has is not an error). Unknown keys, wrong
    types, a user with both or neither of ``password``/``password-hash``, a malformed
    hash, a bad pattern or kind, a permission granting nothing, and a group naming an
    unknown user raise :class:`SecurityConfigError` (a ``ValueError``).
    """
    top = _Reader(table, "security", source, _TOP_KEYS)
    policy = SecurityPolicy(
        enabled=top.boolean("enabled", True),
        allow_anonymous=top.boolean("allow-anonymous", False),
        anonymous_roles=top.strings("anonymous-roles"),
        iterations=iterations,
    )
    users = top.values.get("users", {})
    if not isinstance(users, Mapping):
        top.fail("users", "expected a table of users ([security.users.NAME])")
    for name, entry in users.items():
        r = _Reader(entry, f"security.users.{name}", source, _USER_KEYS)
        password = r.string("password")
        password_hash = r.string("password-hash")
        if (password is None) == (password_hash is None):
            r.fail("password", "give exactly one of password or password-hash")
        roles = r.strings("roles")
        try:
            policy.add_user(name, password, password_hash=password_hash, roles=roles)
        except ValueError as exc:
            r.fail("password-hash" if password_hash else "password", str(exc))
    groups = top.values.get("groups", {})
    if not isinstance(groups, Mapping):
        top.fail("groups", "expected a table of role = [user names]")
    g = _Reader(groups, "security.groups", source, tuple(groups), normalize=False)
    for role in groups:
        for member in g.strings(role):
            user = policy.users.get(member)
            if user is None:
                g.fail(role, f"unknown user {member!r}; users: {', '.join(sorted(policy.users))}")
            else:
                policy.users[member] = User(user.name, user.password_hash, user.roles | {role})
    perms = top.values.get("permissions", [])
    if not isinstance(perms, list):
        top.fail("permissions", "expected an array of tables ([[security.permissions]])")
    for i, entry in enumerate(perms):
        r = _Reader(entry, f"security.permissions[{i}]", source, _PERM_KEYS)
        match = r.string("match", required=True)
        kind = r.string("kind") or "*"
        if kind not in KINDS:
            r.fail("kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
        grants = {a: r.strings(a) for a in ACTIONS}
        if not any(grants.values()):
            r.fail("match", f"this entry grants nothing; list roles under {', '.join(ACTIONS)}")
        assert match is not None
        try:
            check_pattern(match)
        except ValueError as exc:
            r.fail("match", str(exc))
        policy.add_permission(match, kind, **grants)
    return policy
