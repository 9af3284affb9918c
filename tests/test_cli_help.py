"""``jmspy --version`` and ``--help``, and how the CLI refuses what it does not know: like
the tools people know, every command and every option explains itself, and a typo gets
an argparse-style error naming the fix. The parser is walked (never a hand-kept list), so
an option added without help fails here."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import jmspy
from jmspy.cli import build_parser, main
from jmspy.cli_support import source_version

#: guards against a hung subprocess only (a failure, not a timing requirement)
HANG = 120


def _subparsers() -> argparse._SubParsersAction:  # type: ignore[type-arg]
    actions = [a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    return actions[0]


def _commands() -> dict[str, argparse.ArgumentParser]:
    return dict(_subparsers().choices)


def _blocks(help_text: str) -> dict[str, str]:
    """Each argument's help as printed: the lines from its name to the next argument's,
    keyed by every option string (``-h``, ``--help``) or the positional's name."""
    blocks: dict[str, str] = {}
    names: list[str] = []
    for line in help_text.splitlines():
        entry = re.match(r"^  (\S.*?)(?:  +(\S.*))?$", line)
        if entry:
            names = [n.split()[0] for n in entry.group(1).split(", ")]
            for name in names:
                blocks[name] = entry.group(2) or ""
        elif line.startswith("    ") and names:
            for name in names:
                blocks[name] = f"{blocks[name]} {line.strip()}".strip()
        else:
            names = []
    return blocks


COMMANDS = sorted(_commands())


def _jmspy(*args: str, cwd: Path | None = None,
           columns: int = 100) -> subprocess.CompletedProcess[str]:
    """``jmspy ARGS`` in a subprocess, its help wrapped at a known width."""
    return subprocess.run([sys.executable, "-m", "jmspy", *args], capture_output=True,
                          text=True, timeout=HANG, cwd=cwd,
                          env={**os.environ, "COLUMNS": str(columns)})


@pytest.mark.parametrize("columns", [100, 20])
def test_version_prints_the_installed_distributions_version_and_where_it_comes_from(
        columns: int) -> None:
    """One line on stdout whatever the terminal's width (a narrow one, or a long install
    path, once made argparse wrap it)."""
    done = _jmspy("--version", columns=columns)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1, done.stdout
    line = done.stdout.strip()
    assert line.split()[:2] == ["jmspy", metadata.version("jmspy")], line
    assert f"(from {Path(jmspy.__file__).resolve().parent}, Python " in line


@pytest.mark.parametrize(("pyproject", "says"), [
    ('[project]\nname = "jmspy"\nversion = "9.8.7"\n', "9.8.7 (source tree, not installed)"),
    ('[project]\nname = "other"\nversion = "1.0"\n', "unknown (not installed)"),
    (None, "unknown (not installed, and no pyproject.toml beside the package)"),
])
def test_a_source_tree_never_installed_takes_its_version_from_pyproject(
    tmp_path: Path, pyproject: str | None, says: str,
) -> None:
    path = tmp_path / "pyproject.toml"
    if pyproject is not None:
        path.write_text(pyproject)
    assert source_version(path) == says


def test_the_command_list_is_every_command_and_none_is_cut_short() -> None:
    assert sorted(["demo", "broker", "stat", "hash-password", "worker", "bench"]) == COMMANDS
    done = _jmspy("--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # help wraps lines; compare the words
    summaries = {a.dest: a.help for a in _subparsers()._choices_actions}
    assert sorted(summaries) == COMMANDS
    for name, summary in summaries.items():
        assert summary and len(summary) > 20, name
        assert f"{name} {' '.join(summary.split())}" in text, name
    assert "exit status:" in text and "141" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_of_every_command_has_help_shown_by_its_help(command: str) -> None:
    sub = _commands()[command]
    assert sub.description, f"jmspy {command} has no description"
    done = _jmspy(command, "--help", cwd=Path("/"))  # bench: outside a checkout
    assert done.returncode == 0, done.stderr
    assert " ".join(sub.description.split()[:8]) in " ".join(done.stdout.split())
    blocks = _blocks(done.stdout)
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and len(action.help) > 10, (command, action.dest)
        if command == "bench":  # no options of its own: ARGS all go to the suite
            continue
        for name in action.option_strings or [action.metavar or action.dest]:
            assert name in blocks, (command, name, sorted(blocks))
            words = " ".join(action.help.split()[:4]).replace("%%", "%")
            assert words in blocks[name], (command, name, words, blocks[name])
            if action.default not in (None, False, [], argparse.SUPPRESS):
                assert "default" in blocks[name], (command, name, blocks[name])


def test_an_unknown_command_is_refused_naming_the_closest_and_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["stats"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown command 'stats': did you mean 'stat'?" in err
    assert all(name in err for name in COMMANDS) and err.startswith("usage: jmspy")


@pytest.mark.parametrize(("argv", "says"), [
    (["stat", "--bogus"], ("usage: jmspy stat", "jmspy stat: error: unrecognized arguments: "
                           "--bogus")),
    (["--bogus", "stat"], ("usage: jmspy ", "unrecognized option '--bogus'",
                           "a command's options go after it")),
    ([], ("usage: jmspy ", "the following arguments are required: COMMAND")),
    (["demo", "--messages", "many"], ("jmspy demo: error: argument --messages: 'many' is "
                                      "not an integer",)),
    (["demo", "--interval", "0"], ("argument --interval: 0 is out of range: use a number "
                                   "of seconds > 0",)),
    (["hash-password", "--iterations", "0"], ("argument --iterations: 0 is out of range",)),
])
def test_a_bad_command_line_is_an_argparse_error_saying_what_is_wrong(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: tuple[str, ...],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for text in says:
        assert text in err, (text, err)


def test_help_of_a_command_names_its_usage_with_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["stat", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert re.match(r"usage: jmspy stat \[-h\]", out), out
    assert "left out" in out  # says that its own reply queue is not listed
