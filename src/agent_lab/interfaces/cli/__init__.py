"""The ``agent-lab`` command line: ``main`` is the console script's entry point.

This module stays light: the commands are imported inside ``main`` (and on first use of
``app``), so a Ctrl-C while they load ends quietly with exit code 130.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["app", "main"]

EXIT_INTERRUPTED = 130


def main() -> None:
    """Run the ``agent-lab`` command line (the console script)."""
    try:
        from agent_lab.interfaces.cli.commands import main as run_commands
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    run_commands()


def __getattr__(name: str) -> Any:
    if name == "app":
        from agent_lab.interfaces.cli.commands import app

        return app
    raise AttributeError(name)
