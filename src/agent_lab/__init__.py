"""Agent Lab: a runtime and lab for real-time conversational agents that call tools.

The public API, in one namespace::

    from agent_lab import DebugRuntime, DebugRunRequest, AgentParams, OpenAICompatibleChatClient

Each name also lives in its layered module (see ``docs/architecture.md``):
``agent_lab.domain`` (pure data), ``agent_lab.application`` (the runtime, tools, event
agent, store ports), ``agent_lab.infrastructure`` (the OpenAI-compatible client, the
SQLite store, the simulated provider) and ``agent_lab.interfaces`` (CLI, web lab).

Names are imported on first use, so ``import agent_lab`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agent_lab import defaults as _defaults  # noqa: F401 - plugs in the default adapters

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "ChatMessage": "agent_lab.domain.messages",
    "StreamItem": "agent_lab.domain.messages",
    "TokenUsage": "agent_lab.domain.messages",
    "ToolCallEvent": "agent_lab.domain.events",
    "EVENT_BLOCK_START": "agent_lab.domain.events",
    "EVENT_BLOCK_END": "agent_lab.domain.events",
    "AgentLabError": "agent_lab.domain.errors",
    "UsageError": "agent_lab.domain.errors",
    "ConfigError": "agent_lab.domain.errors",
    "ProviderError": "agent_lab.domain.errors",
    "StoreError": "agent_lab.domain.errors",
    "PersistenceFailed": "agent_lab.domain.errors",
    "SessionBusy": "agent_lab.domain.errors",
    "SessionNotFound": "agent_lab.domain.errors",
    "InvalidRequest": "agent_lab.domain.errors",
    "UnknownTools": "agent_lab.domain.errors",
    "ProviderHTTPError": "agent_lab.domain.errors",
    "ProviderTimeout": "agent_lab.domain.errors",
    "ProviderDeadlineExceeded": "agent_lab.domain.errors",
    "ProviderConnectionError": "agent_lab.domain.errors",
    "ProviderProtocolError": "agent_lab.domain.errors",
    "ModelBehaviorError": "agent_lab.domain.errors",
    "InvalidTranscript": "agent_lab.domain.errors",
    "AgentParams": "agent_lab.application.contracts",
    "EventAgentParams": "agent_lab.application.contracts",
    "DebugRunRequest": "agent_lab.application.contracts",
    "RuntimeQueues": "agent_lab.application.queues",
    "ToolDefinition": "agent_lab.application.tools",
    "ToolRegistry": "agent_lab.application.tools",
    "ToolExecutionContext": "agent_lab.application.tools",
    "build_default_tool_registry": "agent_lab.application.tools",
    "EventBatchExecutor": "agent_lab.application.events",
    "EventBatchResult": "agent_lab.application.events",
    "EventResult": "agent_lab.application.events",
    "EventSource": "agent_lab.application.events",
    "EventStatus": "agent_lab.application.events",
    "ResultPolicy": "agent_lab.application.events",
    "EventAgent": "agent_lab.application.event_agent",
    "EventAgentRequest": "agent_lab.application.event_agent",
    "SessionStore": "agent_lab.application.session_store",
    "DebugRuntime": "agent_lab.application.runtime",
    "RuntimeSession": "agent_lab.application.session_handle",
    "OutputMessage": "agent_lab.application.protocol",
    "OpenAICompatibleChatClient": "agent_lab.infrastructure.chat_client",
    "SQLiteSessionStore": "agent_lab.infrastructure.sqlite_store",
}

__all__ = [
    "EVENT_BLOCK_END",
    "EVENT_BLOCK_START",
    "AgentLabError",
    "AgentParams",
    "ChatMessage",
    "ConfigError",
    "DebugRunRequest",
    "DebugRuntime",
    "EventAgent",
    "EventAgentParams",
    "EventAgentRequest",
    "EventBatchExecutor",
    "EventBatchResult",
    "EventResult",
    "EventSource",
    "EventStatus",
    "InvalidRequest",
    "InvalidTranscript",
    "ModelBehaviorError",
    "OpenAICompatibleChatClient",
    "OutputMessage",
    "PersistenceFailed",
    "ProviderConnectionError",
    "ProviderDeadlineExceeded",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderProtocolError",
    "ProviderTimeout",
    "ResultPolicy",
    "RuntimeQueues",
    "RuntimeSession",
    "SQLiteSessionStore",
    "SessionBusy",
    "SessionNotFound",
    "SessionStore",
    "StoreError",
    "StreamItem",
    "TokenUsage",
    "ToolCallEvent",
    "ToolDefinition",
    "ToolExecutionContext",
    "ToolRegistry",
    "UnknownTools",
    "UsageError",
    "__version__",
    "build_default_tool_registry",
]

if TYPE_CHECKING:
    from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
    from agent_lab.application.event_agent import EventAgent, EventAgentRequest
    from agent_lab.application.events import (
        EventBatchExecutor,
        EventBatchResult,
        EventResult,
        EventSource,
        EventStatus,
        ResultPolicy,
    )
    from agent_lab.application.protocol import OutputMessage
    from agent_lab.application.queues import RuntimeQueues
    from agent_lab.application.runtime import DebugRuntime
    from agent_lab.application.session_handle import RuntimeSession
    from agent_lab.application.session_store import SessionStore
    from agent_lab.application.tools import (
        ToolDefinition,
        ToolExecutionContext,
        ToolRegistry,
        build_default_tool_registry,
    )
    from agent_lab.domain.errors import (
        AgentLabError,
        ConfigError,
        PersistenceFailed,
        ProviderError,
        SessionBusy,
        SessionNotFound,
        StoreError,
        UsageError,
    )
    from agent_lab.domain.events import EVENT_BLOCK_END, EVENT_BLOCK_START, ToolCallEvent
    from agent_lab.domain.messages import ChatMessage, StreamItem, TokenUsage
    from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
    from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_lab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
