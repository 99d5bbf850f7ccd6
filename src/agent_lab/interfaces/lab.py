"""The composition root: one place that builds the lab's object graph from settings.

For example::

    async with Lab(load_settings()) as lab:
        runtime = lab.runtime()
        async with runtime.session(lab.request("Set the volume to 20")) as session:
            async for message in session:
                ...

The CLI and the web lab only receive a ``Lab``; nothing is built at import time.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.ports import ChatClient
from agent_lab.application.pricing import PriceTable
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.session_store import SessionStore
from agent_lab.application.tools import ToolRegistry, build_default_tool_registry
from agent_lab.domain.errors import ConfigError
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.openai_compat.secret_mask import has_userinfo, redact_url
from agent_lab.infrastructure.prices import GenaiPriceTable, price_table
from agent_lab.infrastructure.store_factory import open_store
from agent_lab.interfaces.lab_telemetry import start_telemetry
from agent_lab.interfaces.settings import LabSettings

if TYPE_CHECKING:
    from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
    from agent_lab.infrastructure.telemetry.live import LiveTelemetry

SIMULATED_NOTICE = "simulated model — set OPENAI_BASE_URL or --base-url for a real one"


def _chat_client_class() -> type[OpenAICompatibleChatClient]:
    """The chat client, imported on first use: the openai SDK takes about a second to
    import, which commands that never call a model (``sessions``, ``config``,
    ``--version``) should not pay. The lab imports it off the event loop."""
    from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient

    return OpenAICompatibleChatClient


def lab_prices(settings: LabSettings) -> PriceTable:
    """The price table of these settings: their ``prices`` overrides, then genai-prices.

    Building it is cheap; the library's data loads on the first lookup (a few tenths of
    a second; the ``Lab`` loads it off the event loop when it opens).
    """
    return price_table(settings.prices, base_url=settings.base_url)


class Lab:
    """The store, the tools and the model endpoint of one lab process."""

    def __init__(self, settings: LabSettings, *, registry: ToolRegistry | None = None) -> None:
        self.settings = settings
        self._registry = registry
        self._stack = AsyncExitStack()
        self.base_url: str | None = settings.base_url
        self.model = ""
        self.chat_client: ChatClient | None = None
        self.store: SessionStore | None = None
        self.runtime_options: dict[str, Any] = {}
        """Defaults for every ``runtime()`` (e.g. ``claim_wait_seconds`` with workers)."""
        self.prices: PriceTable = lab_prices(settings)
        self.telemetry: LiveTelemetry | None = None

    @property
    def registry(self) -> ToolRegistry:
        """The given registry, else the built-in tools keeping state in the lab's home."""
        if self._registry is None:
            self._registry = build_default_tool_registry(home=self.settings.lab_home())
        return self._registry

    @property
    def endpoint_description(self) -> str:
        """Which model endpoint the lab uses; its URL's credentials are masked."""
        if self.settings.simulated:
            return SIMULATED_NOTICE
        url = redact_url(self.base_url) if self.base_url else self.base_url
        if self.settings.local:
            return f"local model through llama.cpp at {url}"
        return f"model {self.model} at {url}"

    async def __aenter__(self) -> Lab:
        try:
            await self._start_endpoint()
            self.model = self.model or self.settings.chat_model()
            client_class = await asyncio.to_thread(_chat_client_class)
            self.chat_client = await self._stack.enter_async_context(
                client_class(
                    self.base_url or "",
                    api_key=self._api_key(),
                    timeout=self.settings.timeout,
                    max_retries=self.settings.max_retries,
                    transport=self.settings.transport,
                )
            )
            self.store = open_store(self.settings.store_location())
            await asyncio.to_thread(GenaiPriceTable().load)  # warms the shared data
            self._stack.callback(self.store.close)
            self._check_tools()
            if self.settings.otel:  # closed before the store: it still reads from it
                self.telemetry = await start_telemetry(self._stack, self.store, self.prices)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    def _api_key(self) -> str | None:
        """The configured key; without one a placeholder, unless the URL's own
        ``user:pass@`` is the request's ``Authorization`` (the client refuses both)."""
        key = self.settings.secret_key()
        if key or has_userinfo(self.base_url or ""):
            return key
        return "not-needed"

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def _start_endpoint(self) -> None:
        if self.settings.simulated:
            from agent_lab.infrastructure.simulator.provider import (
                LatencyModel,
                SimulatedProvider,
                SimulatedProviderServer,
            )

            latency = LatencyModel(
                ttft_ms=self.settings.simulated_ttft_ms,
                tokens_per_second=self.settings.simulated_tokens_per_second,
            )
            server = SimulatedProviderServer(SimulatedProvider(latency))
            # its own thread: served from this loop, each first byte waits ~40 ms
            await asyncio.to_thread(self._stack.enter_context, server)
            self.base_url = server.base_url
        elif self.settings.local:
            from agent_lab.infrastructure.local_llm import LocalModelServer

            local = LocalModelServer()
            await self._stack.enter_async_context(local)
            self.base_url = local.base_url
            self.model = self.settings.model or local.model

    def _check_tools(self) -> None:
        unknown = [name for name in self.settings.tools if name not in self.registry]
        if unknown:
            known = ", ".join(self.registry.names())
            raise ConfigError(f"unknown tool(s): {', '.join(unknown)} (known: {known})")

    def runtime(self, **options: Any) -> DebugRuntime:
        """A fresh runtime (one per session) on the lab's client, tools and store."""
        if self.chat_client is None:
            raise ConfigError("the lab is not open; use `async with Lab(...)`")
        options = {**self.runtime_options, **options}
        if self.telemetry is not None:
            options.setdefault("queues", self.telemetry.queues())
        return DebugRuntime(
            self.chat_client, registry=self.registry, session_store=self.store, **options
        )

    def request(
        self,
        user_message: str = "",
        *,
        session_id: str | None = None,
        mode: ToolInvocationMode | None = None,
        pre_messages: list[ChatMessage] | None = None,
    ) -> DebugRunRequest:
        """A request built from the settings (``mode`` overrides the configured one)."""
        settings = self.settings
        return DebugRunRequest(
            session_id=session_id,
            user_message=user_message,
            system_prompts=list(settings.system_prompts),
            pre_messages=list(pre_messages or []),
            chat_agent=AgentParams(
                model=self.model,
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
            ),
            event_agent=EventAgentParams(
                model=settings.event_model,
                temperature=settings.event_temperature,
                enabled_tools=list(settings.tools),
                max_event_loops=settings.max_event_loops,
                max_parallel_events=settings.max_parallel_events,
            ),
            tool_invocation_mode=mode or settings.mode,
        )
