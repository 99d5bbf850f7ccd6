"""Agent Lab: a runtime and lab for real-time conversational agents that call tools.

The public API lives in the layered modules (see ``docs/architecture.md``):

* ``agent_lab.domain`` — pure data: messages, events, errors.
* ``agent_lab.application`` — use cases: the runtime, tools, event agent, store port.
* ``agent_lab.infrastructure`` — adapters: the OpenAI-compatible client, SQLite store,
  simulated provider.
* ``agent_lab.interfaces`` — the ``agent-lab`` CLI and the web lab.
"""

__version__ = "0.1.0"
