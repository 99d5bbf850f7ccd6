"""The lab's shared flags, declared once and given to every command that takes them.

A command names the flags it takes among its own parameters, in the order ``--help`` lists
them; ``@lab_flags`` puts their declarations (the aliases of ``options``) into the signature
typer reads, and calls the command with one ``LabOptions`` built from their values::

    @lab_flags(*ENDPOINT_FLAGS, "config", *STORE_FLAGS, "as_json")
    def show_config(options: LabOptions, as_json: JsonOption = False) -> None: ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from agent_lab.interfaces.cli.common import (
    mode_value,
)
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.cli.options import (
    ApiKeyOption,
    BaseUrlOption,
    ConfigOption,
    DbOption,
    EventModelOption,
    FastOption,
    HomeOption,
    LocalOption,
    MaxLoopsOption,
    ModelOption,
    ModeOption,
    OtelOption,
    SystemOption,
    ToolOption,
    TransportOption,
)

Command = Callable[..., None]


def _as_tuple(values: list[str] | None) -> tuple[str, ...]:
    return tuple(values or ())


def _unchanged(value: Any) -> Any:
    return value


def _choice_value(value: Any) -> Any:
    return getattr(value, "value", value)


@dataclass(frozen=True)
class Flag:
    """One shared flag: its typer declaration and the ``LabOptions`` field it fills."""

    option: Any
    """The ``Annotated`` alias typer reads."""
    default: Any = None
    field: str | None = None
    """The ``LabOptions`` field, where it is not the parameter's name."""
    convert: Callable[[Any], Any] = _unchanged


FLAGS: Final[dict[str, Flag]] = {
    "mode": Flag(ModeOption, convert=mode_value),
    "base_url": Flag(BaseUrlOption),
    "api_key": Flag(ApiKeyOption),
    "model": Flag(ModelOption),
    "transport": Flag(TransportOption, convert=_choice_value),
    "event_model": Flag(EventModelOption),
    "tool": Flag(ToolOption, field="tools", convert=_as_tuple),
    "max_event_loops": Flag(MaxLoopsOption),
    "system": Flag(SystemOption, convert=_as_tuple),
    "config": Flag(ConfigOption),
    "db": Flag(DbOption),
    "home": Flag(HomeOption),
    "local": Flag(LocalOption, default=False),
    "otel": Flag(OtelOption, default=False),
    "fast": Flag(FastOption, default=False),
}
"""Every shared flag by parameter name."""

ENDPOINT_FLAGS: Final = ("base_url", "api_key", "model", "transport")
"""Where the chat model is and how to reach it: ``--base-url``, ``--api-key``, ``--model``,
``--transport``."""
TURN_FLAGS: Final = ("mode", *ENDPOINT_FLAGS, "event_model", "tool", "max_event_loops", "system")
"""How a turn runs: mode, endpoint, event model, tools, loop cap and system prompts."""
STORE_FLAGS: Final = ("db", "home")
"""Where sessions are stored: ``--db``, ``--home``."""


def lab_flags(*layout: str, **fixed: Any) -> Callable[[Command], Command]:
    """Give a command the shared flags of ``layout``; ``fixed`` sets ``LabOptions`` fields.

    ``layout`` lists, in ``--help`` order, the shared flags and every parameter of the
    command but its first, which receives the ``LabOptions``.

    Raises:
        TypeError: ``layout`` names a parameter the command lacks or a flag it declares
            itself, or leaves one of its parameters out (when the module is imported).
    """

    def decorate(command: Command) -> Command:
        parameters = _parameters(command, layout)
        shared = [name for name in layout if name in FLAGS]

        @functools.wraps(command)
        def with_options(**values: Any) -> None:
            flags = {name: values.pop(name) for name in shared}
            command(_lab_options(flags, fixed), **values)

        signature = inspect.Signature(parameters, return_annotation=None)
        with_options.__signature__ = signature  # type: ignore[attr-defined]  # what typer reads
        with_options.__annotations__ = {param.name: param.annotation for param in parameters}
        return with_options

    return decorate


def _parameters(command: Command, layout: tuple[str, ...]) -> list[inspect.Parameter]:
    _, *own_params = inspect.signature(command, eval_str=True).parameters.values()
    own = {param.name: param for param in own_params}
    unknown = [name for name in layout if name not in own and name not in FLAGS]
    missing = [name for name in own if name not in layout]
    twice = [name for name in own if name in FLAGS] + _repeated(layout)
    if unknown or missing or twice:
        raise TypeError(
            f"{command.__name__}: layout has unknown {unknown}, misses {missing}, repeats {twice}"
        )
    keyword = inspect.Parameter.KEYWORD_ONLY
    return [
        own[name].replace(kind=keyword)
        if name in own
        else inspect.Parameter(
            name, keyword, default=FLAGS[name].default, annotation=FLAGS[name].option
        )
        for name in layout
    ]


def _repeated(layout: tuple[str, ...]) -> list[str]:
    return sorted({name for name in layout if layout.count(name) > 1})


def _lab_options(flags: dict[str, Any], fixed: dict[str, Any]) -> LabOptions:
    fields = {
        FLAGS[name].field or name: FLAGS[name].convert(value) for name, value in flags.items()
    }
    return LabOptions(**fields, **fixed)
