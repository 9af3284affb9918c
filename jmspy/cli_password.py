"""Where a ``jmspy`` command that logs in to a broker takes the password from.

``--password`` on the command line is visible to every user of the machine (``ps``,
``/proc/PID/cmdline``) and stays in the shell's history, so two other sources are read as
well: ``--password-file PATH`` (its one line; keep the file ``chmod 600``) and the
``JMSPY_PASSWORD`` environment variable (what a container or a service manager sets).
Precedence: ``--password``, then ``--password-file``, then ``JMSPY_PASSWORD``. A file that
cannot be read, is empty or holds more than one line is an error naming the file, never
a silent fallback to the next source (that would log in as someone else, or not at all,
without saying why).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from .errors import InvalidConfigurationException

__all__ = ["ENV_VAR", "PasswordError", "add_password_options", "resolve_password"]

#: The environment variable read when neither option is given.
ENV_VAR = "JMSPY_PASSWORD"

_PRECEDENCE = f"--password, then --password-file, then ${ENV_VAR}"


class PasswordError(InvalidConfigurationException, ValueError):
    """The password source given cannot be used; the message says why and what to do."""


def add_password_options(parser: Any, who: str = "the broker") -> None:
    """Add ``--password`` and ``--password-file`` to ``parser`` (an argparse parser or
    argument group), their help naming the environment variable and the precedence."""
    parser.add_argument(
        "--password", help=f"password for {who} (visible to other users in ps: prefer "
        f"--password-file or ${ENV_VAR}; precedence: {_PRECEDENCE})")
    parser.add_argument(
        "--password-file", metavar="PATH",
        help=f"read the password for {who} from PATH, its first and only line (keep it "
        f"chmod 600); used when --password is not given, before ${ENV_VAR}")


def resolve_password(args: argparse.Namespace,
                     environ: Mapping[str, str] | None = None) -> str | None:
    """The password the options and the environment give (precedence in the module
    docstring), or None when none does. Raises :class:`PasswordError` for a password file
    that cannot be used."""
    if args.password is not None:
        return str(args.password)
    path = getattr(args, "password_file", None)
    if path is not None:
        return _read(str(path))
    value = (os.environ if environ is None else environ).get(ENV_VAR)
    return value if value else None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise PasswordError(f"--password-file {path}: cannot read it ({exc.strerror}); "
                            "give a readable file holding the password on one line") from None
    except UnicodeDecodeError:
        raise PasswordError(f"--password-file {path}: not UTF-8 text; write the password "
                            "as one line of text") from None
    body = text.rstrip("\r\n")  # the newline an editor or ``echo`` leaves is not part of it
    lines = body.splitlines()
    if len(lines) != 1:
        problem = "is empty" if not body else "holds more than one line"
        raise PasswordError(f"--password-file {path} {problem}; write the password alone "
                            "on its first line (a trailing newline is fine)")
    return lines[0]
