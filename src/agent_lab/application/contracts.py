"""The request a user hands the runtime, and the parameters of its two agents."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_lab.domain.messages import ChatMessage

ToolInvocationMode = Literal["dual_agent", "chat_agent_tools"]

MAX_EVENT_LOOPS = 32
"""The largest ``max_event_loops`` a request may ask for."""

DEFAULT_EVENT_AGENT_PROMPT = (
    "You fill in the arguments of exactly one tool call for the conversation so far. "
    "Use only facts stated in the conversation."
)


class AgentParams(BaseModel):
    """Model parameters of the chat agent (and the base of the event agent's)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    """The model name sent to the endpoint."""
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0)
    system_prompt: str = ""
    """An extra system prompt for this agent, sent after the request's system prompts."""
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific request fields, sent as they are."""


class EventAgentParams(BaseModel):
    """Parameters of the event agent and of tool execution in both modes."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, min_length=1)
    """Model for forced argument calls; ``None`` uses the chat agent's model."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=256, gt=0)
    enabled_tools: list[str] = Field(default_factory=list)
    """Registry names of the tools the agents may use, in the order they are offered."""
    max_event_loops: int = Field(default=3, ge=0, le=MAX_EVENT_LOOPS)
    """Rounds per user turn that may run tools; the budget resets every turn (at most
    ``MAX_EVENT_LOOPS``)."""
    max_parallel_events: int = Field(default=8, ge=1)
    """How many tools of one batch run at the same time."""
    system_prompt: str = DEFAULT_EVENT_AGENT_PROMPT
    extra_body: dict[str, Any] = Field(default_factory=dict)


class DebugRunRequest(BaseModel):
    """Everything one run or session needs, except connection secrets."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = Field(default=None, min_length=1, max_length=200)
    """Persist under this id (and continue it if it exists); ``None`` for a fresh id."""
    user_message: str = ""
    """The first user turn; in session mode an empty message waits for input instead."""
    system_prompts: list[str] = Field(default_factory=list)
    pre_messages: list[ChatMessage] = Field(default_factory=list)
    """Configured messages placed after the system prompts and before the history."""
    chat_agent: AgentParams
    event_agent: EventAgentParams = Field(default_factory=EventAgentParams)
    tool_invocation_mode: ToolInvocationMode = "dual_agent"
