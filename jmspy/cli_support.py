"""What every ``jmspy`` command shares: the help layout, the argument types that refuse bad
numbers and ports up front, the version line, and the closed-pipe exit.

Why argument types and not checks inside each command: argparse then names the option,
prints the usage and exits 2 before anything is imported or connected, the way ``git``,
``curl`` or ``ssh`` refuse ``-p 99999``. Without them ``jmspy broker --port 99999``
listened on port 34463 (the socket layer keeps the low 16 bits) and said nothing.

Why the closed-pipe exit: ``jmspy stat | head -1`` closes the pipe after one line; Python
ignores SIGPIPE, so the next write raises :class:`BrokenPipeError` and, unhandled, prints
a traceback about the user's own ``head``. :func:`run_quietly_on_closed_pipe` turns that
into the exit a C tool killed by SIGPIPE reports to the shell: status 141 (128 + 13), no
output. 141 rather than 0 so that ``set -o pipefail`` scripts see that the output was
cut short, exactly as with ``yes | head -1``.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import textwrap
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "CLOSED_PIPE_EXIT",
    "PORT_RANGE",
    "HelpFormatter",
    "VersionAction",
    "at_least",
    "port",
    "port_problem",
    "run_quietly_on_closed_pipe",
    "source_version",
    "version_line",
]

#: The exit status after the reader of stdout went away: 128 + SIGPIPE, as the shell
#: reports for a C tool that SIGPIPE killed.
CLOSED_PIPE_EXIT = 141

#: The range a TCP port takes; 0 is not a port a client can reach.
PORT_RANGE = (1, 65535)


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions and epilogs are wrapped paragraph by paragraph (blank lines between
    paragraphs stay), and a paragraph with an indented line -- examples, a list -- is
    kept as written. An option's help ends with its default unless the text already says
    it, or there is none worth saying (None, False, an empty list)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.split("\n\n"):
            lines = paragraph.splitlines()
            if any(line[:1].isspace() for line in lines):
                paragraphs.append("\n".join(indent + line for line in lines))
            else:
                paragraphs.append(textwrap.fill(" ".join(lines), width,
                                                initial_indent=indent, subsequent_indent=indent))
        return "\n\n".join(paragraphs)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or "default" in text or default is None
                or default is False or default == [] or default is argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def at_least(low: float, kind: type = int, what: str = "an integer", *,
             strict: bool | None = None) -> Callable[[str], Any]:
    """An argparse type: a number >= ``low``, or > ``low`` when ``strict`` (the default
    for ``float``: a number of seconds to wait must be more than 0). argparse names the
    option in its error."""
    above = kind is float if strict is None else strict

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < low or (above and value == low):
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: use {what} {'>' if above else '>='} {low:g}")
        return value
    return parse


def port(*, zero: str | None = None) -> Callable[[str], int]:
    """An argparse type for a TCP port: an integer from 1 to 65535. ``zero`` allows 0 too
    and says what it means there (a server's "pick a free port"), for the error text."""
    low, high = PORT_RANGE
    allowed = f"0 ({zero}) or {low}-{high}" if zero else f"{low}-{high}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a port number: use an integer {allowed}") from None
        if not (low <= value <= high or (zero and value == 0)):
            raise argparse.ArgumentTypeError(f"port {value} is out of range: use {allowed}")
        return value
    return parse


def port_problem(value: int | None) -> str | None:
    """Why ``value`` (a URL's port, None when the URL names none) is not a port a client
    can connect to, or None when it is."""
    low, high = PORT_RANGE
    if value is None or low <= value <= high:
        return None
    return f"port {value} is out of range: use {low}-{high}"


def version_line() -> str:
    """``jmspy X.Y.Z (from DIR, Python A.B.C)``, like ``pip --version``: the version of the
    installed distribution, and where the imported package lives (a source tree can shadow
    an installed copy, so both are worth seeing). A source tree that was never installed
    has no distribution metadata: its ``pyproject.toml`` gives the version then."""
    here = Path(__file__).resolve().parent
    try:
        version = metadata.version("jmspy")
    except metadata.PackageNotFoundError:
        version = source_version(here.parent / "pyproject.toml")
    python = ".".join(str(part) for part in sys.version_info[:3])
    return f"jmspy {version} (from {here}, Python {python})"


class VersionAction(argparse.Action):
    """``--version`` printing :func:`version_line` as one line, whatever the terminal's
    width. argparse's own ``version`` action wraps its text at ``COLUMNS``: a long install
    path then splits the line, and scripts that read ``jmspy --version`` (as they read
    ``pip --version``) get half of it."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default,
                         nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        sys.stdout.write(version_line() + "\n")  # stdout, as argparse's own action
        parser.exit()


def source_version(pyproject: Path) -> str:
    """The version a never-installed source tree's ``pyproject.toml`` declares, marked as
    such; "unknown (...)" saying why when there is none to read."""
    import tomllib

    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, ValueError):
        return "unknown (not installed, and no pyproject.toml beside the package)"
    if project.get("name") != "jmspy" or not isinstance(project.get("version"), str):
        return "unknown (not installed)"
    return f"{project['version']} (source tree, not installed)"


def run_quietly_on_closed_pipe(run: Callable[[], int]) -> int:
    """``run()``'s exit code; :data:`CLOSED_PIPE_EXIT` and nothing printed when the reader
    of stdout closed it (see the module docstring).

    stdout is flushed here, inside the guard: a short output sits in the buffer until the
    interpreter exits, and a failed flush then would print "Exception ignored ...". After
    the pipe broke, ``/dev/null`` takes stdout's place, so that exit flush finds somewhere
    to write and stays silent. A :class:`BrokenPipeError` while stdout's reader is still
    there came from something else (a socket a command did not handle) and is raised on:
    calling it a closed stdout would hide a real failure behind a quiet exit."""
    try:
        try:
            code = run()
        except SystemExit as done:  # argparse after --help, --version or a usage error
            sys.stdout.flush()
            fd = _stdout_fd()
            if done.code in (0, None) and fd is not None and _reader_gone(fd):
                # argparse drops a failed write of its own text (one longer than the
                # buffer is written at once): the output was cut short all the same
                _silence(fd)
                return CLOSED_PIPE_EXIT
            raise
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        fd = _stdout_fd()
        if fd is None or not _reader_gone(fd):
            raise
        _silence(fd)
        return CLOSED_PIPE_EXIT


def _silence(fd: int) -> None:
    """``/dev/null`` in the place of the closed stdout, for the interpreter's exit flush."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _stdout_fd() -> int | None:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a test harness: no fd
        return None


def _reader_gone(fd: int) -> bool:
    """Whether ``fd`` is a pipe whose reading end is closed: poll reports an error on the
    writing end then. Where poll is missing (Windows) the error is taken to be stdout's,
    the likeliest source there."""
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
