"""The composition root: which adapters the application uses when the caller names none.

The application layer never imports infrastructure. What it needs by default is plugged
in here, when the ``agent_lab`` package is imported:

* the built-in tools' backends: ``local_tool_backends`` (SQLite files and a local search
  index, see ``agent_lab.infrastructure.tool_backends.backends``), registered with
  ``agent_lab.application.builtin_defaults.register_default_backends``.

So ``DebugRuntime(client)`` and ``build_default_tool_registry()`` come with working
built-in tools. The adapters are imported on first use, keeping ``import agent_lab``
cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_lab.application.builtin_defaults import register_default_backends

if TYPE_CHECKING:
    from pathlib import Path

    from agent_lab.application.builtin_backends import BuiltinBackends


def local_tool_backends(home: Path | None = None) -> BuiltinBackends:
    """The local backends for ``home`` (``None``: ``AGENT_LAB_HOME``, else the user data dir).

    One instance per home and environment is shared by the whole process.
    """
    from agent_lab.infrastructure.tool_backends.backends import shared_local_backends

    return shared_local_backends(home)


def install() -> None:
    """Register the default adapters (done on ``import agent_lab``; safe to repeat)."""
    register_default_backends(local_tool_backends)


install()
