"""The ``jmspy`` command line: a table of contents of its commands.

Each command lives in its own module -- ``demo`` in :mod:`jmspy.cli_demo`; ``broker``,
``stat`` and ``hash-password`` in :mod:`jmspy.cli_broker`; ``worker`` in
:mod:`jmspy.cli_worker`; ``bench`` in :mod:`jmspy.cli_bench` -- and imports what it runs
only when it runs, so ``jmspy --help`` stays fast. What they share (help layout, port and
number types, the closed-pipe exit) is :mod:`jmspy.cli_support`.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence

from jmspy.cli_support import (
    CLOSED_PIPE_EXIT,
    HelpFormatter,
    VersionAction,
    run_quietly_on_closed_pipe,
)

__all__ = ["build_parser", "main"]

DESCRIPTION = """\
jmspy: a JMS-style messaging SDK for Python, its bundled STOMP broker and its tools.
New here? jmspy demo runs on an in-process broker, with nothing to install or start."""

EPILOG = f"""\
exit status: 0 success; 1 a failure at run time (the broker refused or is unreachable);
2 a usage or configuration error (the message says what to fix); 130 interrupted;
{CLOSED_PIPE_EXIT} the reader of the output went away (jmspy stat | head -1): the
output was cut short, as with any tool stopped by SIGPIPE."""


#: The options of ``jmspy`` itself, before the command (``--version`` is added below).
_OWN_OPTIONS = ("-h", "--help", "--version")


def build_parser() -> argparse.ArgumentParser:
    """The ``jmspy`` parser with every command registered (each command's module adds
    its own sub-parser)."""
    from jmspy.cli_bench import add_command as add_bench
    from jmspy.cli_broker import add_commands as add_broker_commands
    from jmspy.cli_demo import add_command as add_demo
    from jmspy.cli_worker import add_command as add_worker

    parser = argparse.ArgumentParser(prog="jmspy", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=HelpFormatter)
    parser.add_argument("--version", action=VersionAction,
                        help="print the installed jmspy version, where it is imported "
                        "from and the Python version, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands (jmspy COMMAND --help for each)")
    add_demo(sub)
    add_broker_commands(sub)
    add_worker(sub)
    add_bench(sub)
    parser.set_defaults(commands=tuple(sub.choices))
    for command_parser in sub.choices.values():  # for errors after parse_known_args
        command_parser.set_defaults(command_parser=command_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``jmspy`` command; its exit code (see ``EPILOG``)."""
    return run_quietly_on_closed_pipe(lambda: _run(argv))


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    _check_command(parser, words)
    args, extra = parser.parse_known_args(words)
    if extra:  # said by the command's parser, with the command's usage line
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from jmspy import JMSException

        if isinstance(exc, JMSException):
            print(f"jmspy: error: {exc}", file=sys.stderr)
            return 2
        raise
    return result


def _check_command(parser: argparse.ArgumentParser, words: list[str]) -> None:
    """An unknown command is refused naming the closest one (``jmspy stats``: did you mean
    'stat'?) and every command; argparse alone lists the choices only."""
    for word in words:
        if not word.startswith("-"):
            break
        if word.partition("=")[0] not in _OWN_OPTIONS:
            parser.error(f"unrecognized option {word!r}: jmspy's own options are "
                         f"{', '.join(_OWN_OPTIONS)}; a command's options go after it "
                         "(jmspy COMMAND --help lists them)")
    command = next((w for w in words if not w.startswith("-")), None)
    commands = list(parser.get_default("commands") or ())
    if command is None or command in commands:
        return
    close = difflib.get_close_matches(command, commands, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    parser.error(f"unknown command {command!r}: {hint}the commands are "
                 f"{', '.join(commands)} (jmspy --help says what each does)")


if __name__ == "__main__":
    sys.exit(main())
