"""The seam where the built-in tools' default backends plug in.

The application layer never imports infrastructure. The composition root
(``agent_lab.defaults``, run when the ``agent_lab`` package is imported) registers a
factory with ``register_default_backends``; ``default_backends(home)`` asks it for the
backends to use when a caller gave none. This module imports almost nothing, so
registering stays cheap: ``import agent_lab`` loads this module and
``agent_lab.defaults``, nothing else of the package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from pathlib import Path

    from agent_lab.application.builtin_backends import BuiltinBackends

BackendsFactory: TypeAlias = "Callable[[Path | None], BuiltinBackends]"
"""``factory(home)``: the backends keeping state under ``home`` (``None``: the default home)."""

_factory: BackendsFactory | None = None


def register_default_backends(factory: BackendsFactory) -> None:
    """Make ``factory`` the source of backends for callers that pass none.

    ``agent_lab.defaults`` registers the local adapters (SQLite files and a local
    search index) when ``agent_lab`` is imported; call this to replace them
    process-wide, e.g. with in-memory backends.
    """
    global _factory
    _factory = factory


def default_backends(home: Path | None = None) -> BuiltinBackends:
    """The registered default backends, keeping their state under ``home``.

    Args:
        home: The tools' data directory; ``None`` leaves the choice to the factory
            (the local one reads ``AGENT_LAB_HOME``, else the platform's user data
            directory).

    Raises:
        ConfigError: no factory is registered.
    """
    if _factory is None:
        from agent_lab.domain.errors import ConfigError

        raise ConfigError(
            "no default tool backends are registered; pass backends= or call "
            "agent_lab.application.builtin_defaults.register_default_backends()"
        )
    return _factory(home)
