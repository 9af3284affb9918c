"""``jmspy hash-password`` reads the password the way ``passwd`` and ``htpasswd`` do: on a
terminal it prompts twice without echo; from a pipe it reads one line. Driven as real
subprocesses: through a pipe, and on a pseudo-terminal (the ``pty`` module) as its
controlling terminal, where getpass prompts."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from jmspy.broker_ref.core.security import verify_password

#: guards against a hung subprocess only (a failure, not a timing requirement)
HANG = 120
FAST = "1000"  # PBKDF2 rounds: test-friendly; the default is >= 100k
COMMAND = [sys.executable, "-m", "jmspy", "hash-password", "--iterations", FAST]


def test_from_a_pipe_it_reads_one_line_and_prints_its_hash() -> None:
    done = subprocess.run(COMMAND, input="s3cret pass\nsecond line ignored\n",
                          capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip()
    assert verify_password("s3cret pass", printed) and "s3cret" not in printed
    assert done.stderr == ""  # no prompt on a pipe


def test_an_empty_line_from_a_pipe_prints_nothing_and_says_why() -> None:
    done = subprocess.run(COMMAND, input="\n", capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 1 and done.stdout == ""
    assert "empty password; nothing printed" in done.stderr


def _on_a_terminal(*typed: str) -> tuple[int, str]:
    """Run the command with a pseudo-terminal as stdin, stdout, stderr and controlling
    terminal; type each of ``typed`` after the prompt that asks for it. Returns the exit
    status and everything the terminal showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its terminal is the pty
        try:
            os.execv(sys.executable, COMMAND)
        finally:
            os._exit(127)
    shown = b""
    answers, answered = list(typed), 0
    try:
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal (it exited)
                break
            if not chunk:
                break
            shown += chunk
            prompts = shown.count(b"password: ") + shown.count(b"again: ")
            while answers and answered < prompts:  # type after each prompt, once
                os.write(fd, answers.pop(0).encode() + b"\n")
                answered += 1
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_on_a_terminal_it_prompts_twice_without_echo_and_prints_the_hash() -> None:
    code, shown = _on_a_terminal("tty-secret", "tty-secret")
    assert code == 0, shown
    assert "password:" in shown and "again:" in shown
    assert "tty-secret" not in shown  # not echoed, not printed
    printed = shown.strip().splitlines()[-1].strip()
    assert printed.startswith("pbkdf2_sha256$") and verify_password("tty-secret", printed)


def test_on_a_terminal_two_different_answers_print_nothing() -> None:
    code, shown = _on_a_terminal("first", "second")
    assert code == 1
    assert "the passwords differ; nothing printed" in shown and "pbkdf2_sha256$" not in shown


@pytest.mark.parametrize("words", ["prompts twice without echo", "reads one line from stdin"])
def test_its_help_says_where_the_password_comes_from(words: str) -> None:
    done = subprocess.run([*COMMAND[:4], "--help"], capture_output=True, text=True,
                          timeout=HANG)
    assert words in " ".join(done.stdout.split())
