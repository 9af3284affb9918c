"""The ``jmspy`` command line: ``demo`` (jmspy/cli_demo.py), ``broker``, ``stat`` and
``hash-password`` (jmspy/cli_broker.py), ``worker`` (jmspy/cli_worker.py) and ``bench``.

Each command lives in its own module, imported when the parser is built, so this file
stays a table of contents.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jmspy", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    from jmspy.cli_demo import add_command as add_demo

    add_demo(sub)
    from jmspy.cli_broker import add_commands

    add_commands(sub)
    from jmspy.cli_worker import add_command as add_worker

    add_worker(sub)
    bench = sub.add_parser("bench", help="python -m benchmarks [args] (from a source checkout)",
                           add_help=False, prefix_chars="+")  # pass every option through
    bench.add_argument("bench_args", nargs="*")
    bench.set_defaults(func=lambda a: __import__("subprocess").call(
        [sys.executable, "-m", "benchmarks", *a.bench_args]))
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
