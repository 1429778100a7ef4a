"""Approved command prefixes: whole-token matching, and no operator ever passes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caderno.core.errors import UsageError
from caderno.core.prefixes import SHELL_OPERATORS, has_shell_operators, is_allowed, normalize_prefix


@pytest.mark.parametrize(
    ("prefix", "command", "allowed"),
    [
        ("ls", "ls", True),
        ("ls", "ls -la", True),
        ("ls", "ls -la /tmp", True),
        ("ls", "lsblk", False),
        ("ls", "sudo ls", False),
        ("ls", "", False),
        ("git status", "git status", True),
        ("git status", "git status -s", True),
        ("git status", "git stash", False),
        ("git status", "git", False),
        ("git status", 'git "status" -s', True),  # the shell reads it as git status -s
        ("  git   status ", "git status", True),
        ("python -m pytest", "python -m pytest -q tests", True),
        ("python -m pytest", "python -m pip install x", False),
        ("cat", "cat 'my file.txt'", True),
        ("cat 'my file.txt'", "cat 'my file.txt'", True),
        ("cat 'my file.txt'", "cat my file.txt", False),
    ],
)
def test_prefixes_match_whole_tokens(prefix: str, command: str, allowed: bool) -> None:
    assert is_allowed([prefix], command) is allowed


@pytest.mark.parametrize(
    "command",
    [
        "ls; rm -rf /",
        "ls && rm -rf /",
        "ls || rm -rf /",
        "ls | sh",
        "ls &",
        "ls `rm -rf /`",
        "ls $(rm -rf /)",
        "ls ${HOME}",
        "ls < /etc/passwd",
        "ls > out.txt",
        "ls >> out.txt",
        "ls\nrm -rf /",
        "ls\rrm -rf /",
        "ls \x00",
        "ls 'unclosed",
        'ls "unclosed',
        "ls \\",
        'echo "a;b"',  # refused even inside quotes: conservative on purpose
    ],
)
def test_operators_are_never_allowed(command: str) -> None:
    assert has_shell_operators(command)
    assert not is_allowed(["ls", "echo", "ls -la"], command)


def test_plain_commands_have_no_operators() -> None:
    assert not has_shell_operators("git status -s")
    assert not has_shell_operators("grep -r 'a b' src")
    assert not has_shell_operators("echo $HOME")  # a plain variable is not a substitution here


def test_normalize_prefix() -> None:
    assert normalize_prefix("  git   status ") == "git status"
    assert normalize_prefix("cat 'my file.txt'") == "cat 'my file.txt'"
    for bad in ("", "   ", "ls; rm", "ls | sh", "echo $(id)", "ls 'open"):
        with pytest.raises(UsageError, match="prefix"):
            normalize_prefix(bad)


def test_an_invalid_stored_prefix_allows_nothing() -> None:
    assert not is_allowed(["ls;", "", "'open"], "ls")
    assert is_allowed(["ls;", "ls"], "ls -la")


# -- properties ------------------------------------------------------------------------

SAFE_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./=", min_size=1, max_size=8)
WORDS = st.lists(SAFE_WORD, min_size=1, max_size=5)


@given(
    prefixes=st.lists(WORDS.map(" ".join), max_size=4), before=WORDS, after=WORDS, op=st.sampled_from(SHELL_OPERATORS)
)
def test_a_command_with_any_operator_is_never_allowed(
    prefixes: list[str], before: list[str], after: list[str], op: str
) -> None:
    command = " ".join(before) + op + " ".join(after)
    assert has_shell_operators(command)
    # Even the command itself, its first word, or every word as a prefix does not allow it.
    assert not is_allowed([*prefixes, " ".join(before), before[0]], command)


@given(prefix=WORDS, command=st.lists(SAFE_WORD, max_size=7))
def test_a_prefix_allows_exactly_the_commands_that_start_with_its_tokens(prefix: list[str], command: list[str]) -> None:
    text = " ".join(command)
    assert is_allowed([" ".join(prefix)], text) == (command[: len(prefix)] == prefix)
    assert normalize_prefix(" ".join(prefix)) == " ".join(prefix)


@given(prefix=WORDS, rest=st.lists(SAFE_WORD, max_size=3), glue=st.sampled_from(["", "x", "-1"]))
def test_a_longer_first_word_is_not_the_same_command(prefix: list[str], rest: list[str], glue: str) -> None:
    # "ls" never allows "lsblk": gluing letters to the last prefix token makes another command.
    command = [*prefix[:-1], prefix[-1] + glue, *rest]
    assert is_allowed([" ".join(prefix)], " ".join(command)) == (glue == "")
