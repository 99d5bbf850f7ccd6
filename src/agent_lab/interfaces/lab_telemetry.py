"""The lab's OpenTelemetry hook: ``otel = true`` (or ``--otel``) exports every turn."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_lab.application.pricing import PriceTable
    from agent_lab.application.session_store import SessionStore
    from agent_lab.infrastructure.telemetry.live import LiveTelemetry


async def start_telemetry(
    stack: AsyncExitStack, store: SessionStore, prices: PriceTable
) -> LiveTelemetry:
    """Live export for the lab's runtimes, closed (and flushed) with ``stack``; calls are
    priced with ``prices`` (the lab's table, so the spans cost what ``run`` prints).

    Raises:
        ConfigError: the ``otel`` extra is not installed (the message names it).
    """
    from agent_lab.infrastructure import telemetry

    telemetry.require_otel()
    # prices are looked up in the export's worker threads, never on the loop
    options = telemetry.default_options(prices)
    live = await asyncio.to_thread(telemetry.live_telemetry, store, options=options)
    stack.push_async_callback(live.aclose)
    return live
