"""What model calls cost, in US dollars, from a price table (pure, no I/O).

A ``PriceTable`` answers the price of a model name, or ``None`` when it does not know
one. Costs are computed from the usage the provider reported: uncached prompt tokens
at the input rate, cached prompt tokens at the cached-input rate (the input rate when
the table has none), completion tokens at the output rate. A call whose model has no
known price, or whose provider reported no usage, has an unknown cost (``None``),
never zero, and a sum that includes such a call is unknown as well (its priced part
stays available as ``CostSum.known``).

``cost_breakdown`` turns the call metrics a session store returns
(``usage_summary()["calls"]``, ``CallMetric`` or plain dicts) into the cost of every
call, round, turn and the session, each split by the role of the call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from agent_lab.application.session_store import CallMetric

ModelRole = Literal["chat", "argument_fallback", "argument_generation"]
"""Why a model call was made (a ``CallMetric.call_kind`` other than ``tool_execution``)."""
MODEL_ROLES: tuple[ModelRole, ...] = get_args(ModelRole)
CURRENCY = "USD"
TOKENS_PER_PRICE_UNIT = Decimal(1_000_000)

UnknownReason = Literal["unpriced_model", "no_usage_reported", "no_model"]


class PriceTier(BaseModel):
    """Rates that apply to a whole call once its prompt has more than ``above`` tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    above: int = Field(ge=0)
    input_per_mtok: Decimal = Field(ge=0)
    output_per_mtok: Decimal = Field(ge=0)
    cached_input_per_mtok: Decimal | None = Field(default=None, ge=0)


class Price(BaseModel):
    """A model's price in US dollars per million tokens.

    This is also the shape of a user override in the config file
    (``[prices."model"] input_per_mtok = 0.15`` …).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: Decimal = Field(ge=0)
    output_per_mtok: Decimal = Field(ge=0)
    cached_input_per_mtok: Decimal | None = Field(default=None, ge=0)
    """Cached prompt tokens; ``None`` bills them at the input rate."""
    tiers: tuple[PriceTier, ...] = ()
    """Higher rates for long prompts, lowest threshold first."""
    source: str = "config"
    """Where the price comes from, e.g. ``config`` or ``genai-prices 0.2.3: openai/gpt-4o``."""

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> Decimal:
        """The dollars one call costs; ``prompt_tokens`` includes ``cached_tokens``."""
        rates = self._rates_for(prompt_tokens)
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cached_rate = rates.cached_input_per_mtok
        if cached_rate is None:
            cached_rate = rates.input_per_mtok
        micro = (
            (prompt_tokens - cached) * rates.input_per_mtok
            + cached * cached_rate
            + completion_tokens * rates.output_per_mtok
        )
        return micro / TOKENS_PER_PRICE_UNIT

    def _rates_for(self, prompt_tokens: int) -> Price | PriceTier:
        applicable = [tier for tier in self.tiers if prompt_tokens > tier.above]
        return max(applicable, key=lambda tier: tier.above) if applicable else self


@runtime_checkable
class PriceTable(Protocol):
    """Knows what models cost."""

    def price_of(self, model: str) -> Price | None:
        """The price of ``model``, or ``None`` when it is not known."""
        ...


class OverriddenPrices:
    """User prices first (model names compared case-insensitively), then ``fallback``."""

    def __init__(self, overrides: Mapping[str, Price], fallback: PriceTable | None = None) -> None:
        self._overrides = {name.strip().lower(): price for name, price in overrides.items()}
        self._fallback = fallback

    def price_of(self, model: str) -> Price | None:
        override = self._overrides.get(model.strip().lower())
        if override is not None:
            return override
        return self._fallback.price_of(model) if self._fallback is not None else None


@dataclass(frozen=True)
class CallCost:
    """The cost of one model call."""

    metric_key: str
    turn_index: int
    round_index: int
    role: ModelRole
    model: str | None
    amount: Decimal | None
    """US dollars; ``None`` when unknown (see ``unknown_reason``)."""
    price: Price | None = None
    unknown_reason: UnknownReason | None = None


@dataclass(frozen=True)
class CostSum:
    """The cost of several calls: exact when every call is priced, else unknown."""

    known: Decimal = Decimal(0)
    """The dollars of the priced calls."""
    priced_calls: int = 0
    unpriced_calls: int = 0

    @property
    def amount(self) -> Decimal | None:
        """The total in dollars, or ``None`` when any call's cost is unknown."""
        return None if self.unpriced_calls else self.known

    def plus(self, call: CallCost) -> CostSum:
        if call.amount is None:
            return CostSum(self.known, self.priced_calls, self.unpriced_calls + 1)
        return CostSum(self.known + call.amount, self.priced_calls + 1, self.unpriced_calls)

    def describe(self) -> str:
        """``$0.00123``, ``unknown``, or ``≥ $0.00123 (2 calls unpriced)``."""
        if not self.unpriced_calls:
            return format_usd(self.known)
        if not self.priced_calls:
            return "unknown"
        plural = "s" if self.unpriced_calls != 1 else ""
        return f"≥ {format_usd(self.known)} ({self.unpriced_calls} call{plural} unpriced)"


@dataclass(frozen=True)
class CostSplit:
    """A total and its split by role (every role present, empty ones at zero calls)."""

    total: CostSum = CostSum()
    by_role: Mapping[ModelRole, CostSum] = field(
        default_factory=lambda: {role: CostSum() for role in MODEL_ROLES}
    )

    def plus(self, call: CallCost) -> CostSplit:
        by_role = dict(self.by_role)
        by_role[call.role] = by_role[call.role].plus(call)
        return CostSplit(self.total.plus(call), by_role)


@dataclass(frozen=True)
class CostBreakdown:
    """Every model call's cost and the sums per round, per turn and for the session."""

    calls: tuple[CallCost, ...]
    rounds: Mapping[tuple[int, int], CostSplit]
    """Keyed by ``(turn_index, round_index)``."""
    turns: Mapping[int, CostSplit]
    session: CostSplit
    currency: str = CURRENCY

    def round(self, turn_index: int, round_index: int) -> CostSplit:
        return self.rounds.get((turn_index, round_index), CostSplit())

    def turn(self, turn_index: int) -> CostSplit:
        return self.turns.get(turn_index, CostSplit())


def cost_of(
    table: PriceTable,
    model: str | None,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
) -> Decimal | None:
    """One call's dollars from live figures (a ``round_stats`` output, say), or ``None``."""
    price = table.price_of(model) if model else None
    if price is None:
        return None
    return price.cost(prompt_tokens, completion_tokens, cached_tokens)


def call_cost(metric: CallMetric, table: PriceTable) -> CallCost | None:
    """The cost of one metric; ``None`` for metrics that are not model calls."""
    if metric.call_kind not in MODEL_ROLES:
        return None
    role: ModelRole = metric.call_kind
    price = table.price_of(metric.model) if metric.model else None
    reason = _unknown_reason(metric, price)
    amount = None
    if price is not None and reason is None:
        amount = price.cost(metric.prompt_tokens, metric.completion_tokens, metric.cached_tokens)
    return CallCost(
        metric.metric_key,
        metric.turn_index,
        metric.round_index,
        role,
        metric.model,
        amount,
        price,
        reason,
    )


def _unknown_reason(metric: CallMetric, price: Price | None) -> UnknownReason | None:
    if not metric.model:
        return "no_model"
    if price is None:
        return "unpriced_model"
    if not metric.usage_reported:
        return "no_usage_reported"
    return None


def cost_breakdown(
    calls: Iterable[CallMetric | Mapping[str, Any]], table: PriceTable
) -> CostBreakdown:
    """Costs from call metrics (``usage_summary(session_id)["calls"]``), in their order."""
    costs: list[CallCost] = []
    rounds: dict[tuple[int, int], CostSplit] = {}
    turns: dict[int, CostSplit] = {}
    session = CostSplit()
    for raw in calls:
        metric = raw if isinstance(raw, CallMetric) else CallMetric.model_validate(dict(raw))
        cost = call_cost(metric, table)
        if cost is None:
            continue
        costs.append(cost)
        key = (cost.turn_index, cost.round_index)
        rounds[key] = rounds.get(key, CostSplit()).plus(cost)
        turns[cost.turn_index] = turns.get(cost.turn_index, CostSplit()).plus(cost)
        session = session.plus(cost)
    return CostBreakdown(tuple(costs), rounds, turns, session)


def format_usd(amount: Decimal | None) -> str:
    """``$0.00123`` (three significant digits, at least cents), or ``unknown``."""
    if amount is None:
        return "unknown"
    if amount == 0:
        return "$0"
    places = max(2, 2 - amount.adjusted())
    return f"${amount.quantize(Decimal(1).scaleb(-places)):f}"
