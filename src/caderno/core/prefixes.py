"""Approved command prefixes: which shell commands an agent may run unasked.

A person approves a *prefix* once ("git status", "ls"); afterwards a command
is allowed when its words start with the prefix's words. Matching is by
whole tokens, split the way a POSIX shell splits words (``shlex``):

====================  ===========================  =========================
prefix                allowed                      not allowed
====================  ===========================  =========================
``ls``                ``ls``, ``ls -la /tmp``      ``lsblk``, ``sudo ls``
``git status``        ``git status -s``            ``git stash``, ``git``
``python -m pytest``  ``python -m pytest -q``      ``python -m pip install``
====================  ===========================  =========================

Quoting is read as the shell reads it, so ``git "status"`` is
``git status``. A prefix approves every argument that may follow it:
approve ``git status``, not ``git``.

A command that contains a shell control operator, a redirection or a
substitution is never allowed, whatever the prefixes: ``;``, ``&``
(``&&``, background), ``|`` (``||``, pipes), a backtick, ``$(``, ``${``,
``<``, ``>``, a newline, a carriage return or a NUL byte, or quotes that
do not close. The check is on the raw text, inside quotes too: it is
conservative on purpose (``echo "a;b"`` is refused) because a prefix
check that had to model every quoting rule of every shell would be the
weak point. Such a command goes to the person for approval each time.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from .errors import UsageError

__all__ = ["SHELL_OPERATORS", "has_shell_operators", "is_allowed", "normalize_prefix"]

SHELL_OPERATORS: tuple[str, ...] = (";", "&", "|", "`", "$(", "${", "<", ">", "\n", "\r", "\x00")
"""Substrings that make a command never pre-approved (``&&``/``||`` contain ``&``/``|``)."""


def has_shell_operators(command: str) -> bool:
    """Whether ``command`` chains, redirects or substitutes, or cannot be split.

    Args:
        command: the command line as the agent would pass it to a shell.

    Returns:
        True when it contains any of ``SHELL_OPERATORS`` (anywhere, quoted
        or not) or has unbalanced quotes.
    """
    if any(op in command for op in SHELL_OPERATORS):
        return True
    return _split(command) is None


def normalize_prefix(prefix: str) -> str:
    """The canonical form of an approved prefix: its tokens, shell-quoted, one space apart.

    Args:
        prefix: what the person approved, e.g. ``"  git   status "``.

    Returns:
        The prefix re-joined, e.g. ``"git status"``; store this form.

    Raises:
        UsageError: the prefix is empty or contains a shell operator (a
            prefix may never approve a chain or a redirection).
    """
    if has_shell_operators(prefix):
        raise UsageError(
            f"the prefix {prefix!r} contains a shell operator, a substitution or unbalanced quotes; "
            f"a prefix is plain words such as 'git status'"
        )
    tokens = _split(prefix)
    if not tokens:
        raise UsageError("an approved prefix cannot be empty; give the command's first words, e.g. 'ls'")
    return shlex.join(tokens)


def is_allowed(prefixes: Iterable[str], command: str) -> bool:
    """Whether an approved prefix allows ``command``.

    Args:
        prefixes: approved prefixes (normalised or not). One that
            ``normalize_prefix`` would refuse allows nothing, rather than
            raising at check time.
        command: the command line the agent wants to run.

    Returns:
        True when the command has no shell operators and its tokens start
        with the tokens of at least one prefix.
    """
    if has_shell_operators(command):
        return False
    tokens = _split(command)
    if not tokens:
        return False
    for prefix in prefixes:
        if has_shell_operators(prefix):
            continue
        wanted = _split(prefix)
        if wanted and tokens[: len(wanted)] == wanted:
            return True
    return False


def _split(text: str) -> list[str] | None:
    """Shell words of ``text``, or None when its quotes do not balance."""
    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError:
        return None
