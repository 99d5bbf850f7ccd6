"""Attribute names: the OpenTelemetry GenAI semantic conventions, pinned, and our own.

The GenAI names follow the OpenTelemetry semantic conventions **v1.41.1** (GenAI spans,
status "development"): the version Arize Phoenix reads them at, and the schema URL the
spans carry. Everything those conventions do not define lives under ``agent_lab.*``.
"""

from __future__ import annotations

from typing import Final

SEMCONV_VERSION: Final = "1.41.1"
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
INSTRUMENTATION_NAME: Final = "agent_lab"

# gen_ai.* (semantic conventions v1.41.1)
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
AGENT_NAME: Final = "gen_ai.agent.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_STREAM: Final = "gen_ai.request.stream"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"

OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"

PROVIDER: Final = "openai"
"""Every call goes over the OpenAI-compatible chat completions API; the record keeps no
endpoint URL, so the provider is named after that API."""

# metrics (semantic conventions v1.41.1, seconds and tokens)
METRIC_TTFC: Final = "gen_ai.client.operation.time_to_first_chunk"
METRIC_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_TOKENS: Final = "gen_ai.client.token.usage"
TOKEN_TYPE: Final = "gen_ai.token.type"

# agent_lab.* (what the conventions do not define)
SESSION_ID: Final = "agent_lab.session.id"
SESSION_TITLE: Final = "agent_lab.session.title"
MODE: Final = "agent_lab.mode"
TURN_INDEX: Final = "agent_lab.turn.index"
TURN_STATUS: Final = "agent_lab.turn.status"
TURN_ROUNDS: Final = "agent_lab.turn.round_count"
TURN_WALL_MS: Final = "agent_lab.turn.wall_time_ms"
ROUND_INDEX: Final = "agent_lab.round.index"
ROUND_HAD_EVENTS: Final = "agent_lab.round.had_events"
ROUND_BUDGET: Final = "agent_lab.round.event_budget_remaining"
CALL_ROLE: Final = "agent_lab.call.role"
CALL_KIND: Final = "agent_lab.call.kind"
METRIC_KEY: Final = "agent_lab.call.metric_key"
LATENCY_MS: Final = "agent_lab.call.latency_ms"
USAGE_REPORTED: Final = "agent_lab.usage.reported"
UNREPORTED_USAGE_CALLS: Final = "agent_lab.usage.unreported_calls"
"""On a turn span: its model calls whose provider sent no usage (not in its totals)."""
CACHED_TOKENS: Final = "agent_lab.usage.cached_tokens"
TOTAL_TOKENS: Final = "agent_lab.usage.total_tokens"
COST_USD: Final = "agent_lab.cost.usd"
COST_STATUS: Final = "agent_lab.cost.status"
COST_SOURCE: Final = "agent_lab.cost.price_source"
VISIBLE_TTFT_MS: Final = "agent_lab.ttft.visible_ms"
PROVIDER_TTFT_MS: Final = "agent_lab.ttft.provider_ms"
WARMUP_MS: Final = "agent_lab.client.warmup_ms"
CONNECT_MS: Final = "agent_lab.client.connect_ms"
BATCH_SCOPE: Final = "agent_lab.batch.scope"
BATCH_EVENT_IDS: Final = "agent_lab.batch.event_ids"
BATCH_EVENT_NAMES: Final = "agent_lab.batch.event_names"
BATCH_RESULT_COUNT: Final = "agent_lab.batch.result_count"
ARG_RESOLUTION: Final = "agent_lab.arguments.resolution"
ARG_FAILURE: Final = "agent_lab.arguments.failure"
TOOL_STATUS: Final = "agent_lab.tool.status"
TOOL_SOURCE: Final = "agent_lab.tool.source"
TOOL_LATENCY_MS: Final = "agent_lab.tool.latency_ms"
RESULT_POLICY: Final = "agent_lab.tool.result_policy"
DEDUPLICATED_FROM: Final = "agent_lab.tool.deduplicated_from"
POLICY_TERMINATE: Final = "agent_lab.policy.terminate"
POLICY_FOLLOW_UP: Final = "agent_lab.policy.llm_follow_up"
POLICY_POLICIES: Final = "agent_lab.policy.result_policies"
TERMINAL_EVENT_IDS: Final = "agent_lab.policy.terminal_event_ids"
