"""The ``agent-lab`` command line: ``main`` is the console script's entry point."""

from agent_lab.interfaces.cli.commands import app, main

__all__ = ["app", "main"]
