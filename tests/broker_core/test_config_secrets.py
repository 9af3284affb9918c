"""A broker config file that holds plaintext passwords and that other users may read is
warned about when it is loaded (at broker start), saying how to fix it; hashed passwords
and a file only its owner reads are not."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from jmspy.broker_ref.config import load_config

PLAIN = '[security.users.alice]\npassword = "alice-pw"\nroles = ["r"]\n'
#: a pbkdf2_sha256 hash (of "pw", 1,000 rounds): a hash, not the password
HASHED = ('[security.users.bob]\npassword-hash = "pbkdf2_sha256$1000$'
          'c2FsdHNhbHRzYWx0c2FsdA==$7HSXHPpUSbT10m6Q3Fs2JDkUVYvQHdz+JC3yXzRtDbY="\n')


def _loaded(tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str,
            mode: int) -> list[str]:
    path = tmp_path / "broker.toml"
    path.write_text(text)
    path.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="jmspy.broker.config"):
        load_config(path)
    return [r.getMessage() for r in caplog.records if r.name == "jmspy.broker.config"]


@pytest.mark.parametrize(("mode", "who"), [(0o644, "every user of this machine"),
                                           (0o640, "the members of its group"),
                                           (0o604, "every user of this machine")])
def test_a_readable_config_with_plaintext_passwords_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int, who: str,
) -> None:
    (warning,) = _loaded(tmp_path, caplog, PLAIN, mode)
    path = tmp_path / "broker.toml"
    assert f"config file {path} holds plaintext passwords (users: alice)" in warning
    assert who in warning and f"mode {mode:04o}" in warning
    assert f"chmod 600 {path}" in warning and "jmspy hash-password" in warning
    assert "alice-pw" not in warning  # the warning never shows the password


def test_a_config_only_its_owner_reads_is_not_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    assert _loaded(tmp_path, caplog, PLAIN, 0o600) == []


def test_hashed_passwords_in_a_readable_config_are_not_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    assert _loaded(tmp_path, caplog, HASHED, 0o644) == []


def test_every_user_with_a_plaintext_password_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    text = PLAIN + HASHED + '[security.users.carol]\npassword = "c"\n'
    (warning,) = _loaded(tmp_path, caplog, text, 0o644)
    assert "(users: alice, carol)" in warning
