"""The peer frameworks, driven the way their own tests drive them (no network, no tracing).

* OpenAI Agents SDK: a ``Model`` whose ``stream_response`` replays prebuilt Responses
  stream events, run with ``Runner.run_streamed`` and ``stream_events()``.
* Pydantic AI: ``FunctionModel`` with a stream function replaying prebuilt strings, run
  with ``agent.run_stream`` and ``stream_text(delta=True, debounce_by=None)`` (every
  delta surfaces on its own, as ours do).

Both are optional (the ``bench`` extra); ``available()`` says which are installed.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator
from typing import Any

PEERS = {"openai-agents": "agents", "pydantic-ai-slim": "pydantic_ai"}


def version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def available() -> dict[str, str]:
    """Installed peers: distribution name → version."""
    found = {name: version(name) for name in PEERS}
    return {name: v for name, v in found.items() if v is not None}


# --- OpenAI Agents SDK -------------------------------------------------------------------


def agents_text_events(count: int, text: str = " word") -> list[Any]:
    """The Responses stream of one text answer in ``count`` deltas."""
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseContentPartAddedEvent,
        ResponseContentPartDoneEvent,
        ResponseCreatedEvent,
        ResponseOutputItemAddedEvent,
        ResponseOutputItemDoneEvent,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseTextDeltaEvent,
        ResponseTextDoneEvent,
    )

    part = ResponseOutputText(type="output_text", text=text * count, annotations=[])
    message = ResponseOutputMessage(
        id="msg_1", type="message", role="assistant", status="completed", content=[part]
    )
    response = Response(
        id="resp_1",
        created_at=0,
        model=MODEL_NAME,
        object="response",
        output=[message],
        tool_choice="none",
        tools=[],
        top_p=None,
        parallel_tool_calls=False,
    )
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    events: list[Any] = [
        ResponseCreatedEvent(type="response.created", response=response, sequence_number=0),
        ResponseOutputItemAddedEvent(
            type="response.output_item.added", item=message, output_index=0, sequence_number=1
        ),
        ResponseContentPartAddedEvent(
            type="response.content_part.added", part=part, sequence_number=2, **where
        ),
    ]
    events += [
        ResponseTextDeltaEvent(
            type="response.output_text.delta",
            delta=text,
            logprobs=[],
            sequence_number=3 + n,
            **where,
        )
        for n in range(count)
    ]
    seq = 3 + count
    events += [
        ResponseTextDoneEvent(
            type="response.output_text.done",
            text=part.text,
            logprobs=[],
            sequence_number=seq,
            **where,
        ),
        ResponseContentPartDoneEvent(
            type="response.content_part.done", part=part, sequence_number=seq + 1, **where
        ),
        ResponseOutputItemDoneEvent(
            type="response.output_item.done", item=message, output_index=0, sequence_number=seq + 2
        ),
        ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=seq + 3
        ),
    ]
    return events


MODEL_NAME = "bench-model"


def agents_replay_model(events: list[Any]) -> Any:
    """An Agents SDK ``Model`` that streams ``events`` and nothing else."""
    from agents.models.interface import Model

    class ReplayModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark only streams")

        async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            for event in events:
                yield event

    return ReplayModel()


async def agents_stream(model: Any, user: str = "Hello there.") -> int:
    """One streamed run; returns the number of stream events consumed."""
    from agents import Agent, RunConfig, Runner

    agent = Agent(name="bench", instructions="You are a helpful assistant.", model=model)
    result = Runner.run_streamed(agent, user, run_config=RunConfig(tracing_disabled=True))
    count = 0
    async for _ in result.stream_events():
        count += 1
    return count


# --- Pydantic AI -------------------------------------------------------------------------


def pydantic_ai_model(count: int, text: str = " word") -> Any:
    """A ``FunctionModel`` whose stream function yields ``count`` prebuilt deltas."""
    from pydantic_ai.models.function import FunctionModel

    pieces = [text] * count

    async def stream(messages: Any, info: Any) -> AsyncIterator[str]:
        for piece in pieces:
            yield piece

    return FunctionModel(stream_function=stream)


async def pydantic_ai_stream(model: Any, user: str = "Hello there.") -> int:
    """One ``run_stream``; returns the number of text deltas consumed."""
    from pydantic_ai import Agent

    agent = Agent(model, instructions="You are a helpful assistant.")
    count = 0
    async with agent.run_stream(user) as result:
        async for _ in result.stream_text(delta=True, debounce_by=None):
            count += 1
    return count
