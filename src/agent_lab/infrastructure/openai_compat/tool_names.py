"""Reversible aliases for registry tool names that providers reject (no I/O).

Providers accept function names matching ``^[a-zA-Z0-9_-]{1,64}$``. A registry name
such as ``calendar.schedule.create`` goes out as ``calendar__schedule__create``; the
mapping is built per request from every name the request mentions, valid names keep
their own spelling and win any collision, and an alias that is already taken gets a
hash suffix, so the way back is always unambiguous.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Function names every OpenAI-compatible provider accepts."""

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_MAX = 64


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def _readable(name: str) -> str:
    alias = _UNSAFE.sub(lambda match: "__" if match.group() == "." else "_", name) or "tool"
    return alias if len(alias) <= _MAX else f"{alias[: _MAX - 9]}_{_digest(name)}"


class ToolNameAliases:
    """The two-way map between registry names and provider function names of one request."""

    __slots__ = ("_to_provider", "_to_registry")

    def __init__(self, names: Iterable[str] = ()) -> None:
        """Builds the map for every name the request mentions.

        Args:
            names: Registry names of tools, of ``tool_choice`` and of the transcript.
        """
        self._to_provider: dict[str, str] = {}
        self._to_registry: dict[str, str] = {}
        unique = list(dict.fromkeys(names))
        for name in unique:
            if PROVIDER_NAME.match(name):
                self._bind(name, name)
        for name in unique:
            if name not in self._to_provider:
                self._bind(name, self._free_alias(name))

    def to_provider(self, name: str) -> str:
        """Returns the function name to send for a registry name."""
        alias = self._to_provider.get(name)
        if alias is None:
            valid = PROVIDER_NAME.match(name) and name not in self._to_registry
            alias = name if valid else self._free_alias(name)
            self._bind(name, alias)
        return alias

    def to_registry(self, provider_name: str) -> str:
        """Returns the registry name for a function name the provider sent back.

        Names that were never aliased (including a model echoing a registry name) come
        back unchanged.
        """
        return self._to_registry.get(provider_name, provider_name)

    @property
    def aliased(self) -> dict[str, str]:
        """Registry name → alias, for the names that needed one."""
        return {name: alias for name, alias in self._to_provider.items() if name != alias}

    def _bind(self, name: str, alias: str) -> None:
        self._to_provider[name] = alias
        self._to_registry[alias] = name

    def _free_alias(self, name: str) -> str:
        alias = _readable(name)
        if alias not in self._to_registry:
            return alias
        base = f"{alias[: _MAX - 9]}_{_digest(name)}"
        alias, counter = base, 1
        while alias in self._to_registry:
            counter += 1
            suffix = f"_{counter}"
            alias = f"{base[: _MAX - len(suffix)]}{suffix}"
        return alias
