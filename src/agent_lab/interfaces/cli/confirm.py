"""``confirm``: the yes/no question of the commands that delete (``sessions delete``,
``sessions prune``)."""

from __future__ import annotations

import sys

import typer


def confirm(question: str) -> bool:
    """Ask ``question`` on stdout; only ``y`` or ``yes`` agrees.

    An empty answer, ``n`` or ``no`` declines, and so does the end of the input (stdin
    closed or ``< /dev/null``), since nobody agreed. Ctrl-C is not an answer: it still
    interrupts the command (``error: interrupted``, exit code 130).
    """
    try:
        return _ask(question)
    except KeyboardInterrupt:
        typer.echo()
        raise typer.Abort from None


def _ask(question: str) -> bool:
    while True:
        typer.echo(f"{question} [y/N]: ", nl=False)
        try:
            line = sys.stdin.readline() if sys.stdin is not None else ""
        except (OSError, ValueError):  # a closed or unreadable stdin
            line = ""
        if not line:
            typer.echo()
            return False
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            return False
        typer.echo("please answer y or n")
