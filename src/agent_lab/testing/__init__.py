"""Test doubles for users who test their own tools, prompts and clients.

* ``ScriptedChatClient`` — replays scripted rounds, records every call, ``assert_complete()``.
* ``FunctionChatClient`` — the model as a function of the call.
* ``InMemorySessionStore`` — the ``SessionStore`` port without a file.
* ``SSETranscriptServer`` — a real local HTTP server replaying recorded SSE streams.
* ``text``, ``tool_call``, ``text_event`` — builders of scripted round items.

See ``docs/testing.md``.
"""

from agent_lab.testing.chat_clients import (
    FunctionChatClient,
    RecordedCall,
    ScriptedChatClient,
    UnconsumedRounds,
    UnexpectedModelCall,
    text,
    text_event,
    tool_call,
)
from agent_lab.testing.memory_store import InMemorySessionStore
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

__all__ = [
    "FunctionChatClient",
    "InMemorySessionStore",
    "RecordedCall",
    "SSETranscriptServer",
    "ScriptedChatClient",
    "ScriptedResponse",
    "UnconsumedRounds",
    "UnexpectedModelCall",
    "text",
    "text_event",
    "tool_call",
]
