"""The cost of a turn's model calls, from a price table (``application.pricing``)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from agent_lab.application.pricing import MODEL_ROLES, CostSum, PriceTable
from agent_lab.application.record.model import CostRecord, CostSummary, ModelCallRecord

_ROLE_OF = {"chat": "chat", "follow_up": "chat"}
"""Chat calls and follow-ups are both the chat agent's calls (``call_kind`` ``chat``)."""


def call_cost(call: ModelCallRecord, prices: PriceTable | None) -> CostRecord:
    """One call's dollars, or why they are unknown (never zero for lack of a price)."""
    if call.status == "running":
        return CostRecord(unknown_reason="running")
    if not call.model:
        return CostRecord(unknown_reason="no_model")
    price = prices.price_of(call.model) if prices is not None else None
    if price is None:
        reason = "unpriced_model" if prices is not None else "no_price_table"
        return CostRecord(unknown_reason=reason)
    if call.usage is None:
        return CostRecord(unknown_reason="no_usage_reported", price_source=price.source)
    usage = call.usage
    amount = price.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
    return CostRecord(amount_usd=amount, price_source=price.source)


def priced(calls: Sequence[ModelCallRecord], prices: PriceTable | None) -> CostSummary:
    """Price every call (in place) and sum them, in total and by role.

    ``by_role`` is keyed by ``chat`` (first calls and follow-ups), ``follow_up`` (the
    follow-ups alone), ``argument_fallback`` and ``argument_generation``.
    """
    total = CostSum()
    by_role: dict[str, CostSum] = {role: CostSum() for role in (*MODEL_ROLES, "follow_up")}
    for call in calls:
        call.cost = call_cost(call, prices)
        amount = call.cost.amount_usd
        unpriced = amount is None
        total = _plus(total, amount, unpriced)
        role = _ROLE_OF.get(call.role, call.role)
        by_role[role] = _plus(by_role[role], amount, unpriced)
        if call.role == "follow_up":
            by_role["follow_up"] = _plus(by_role["follow_up"], amount, unpriced)
    return CostSummary(
        total_usd=total.amount,
        known_usd=total.known,
        unpriced_calls=total.unpriced_calls,
        by_role={role: part.amount for role, part in by_role.items()},
    )


def _plus(part: CostSum, amount: Decimal | None, unpriced: bool) -> CostSum:
    if unpriced or amount is None:
        return CostSum(part.known, part.priced_calls, part.unpriced_calls + 1)
    return CostSum(part.known + amount, part.priced_calls + 1, part.unpriced_calls)
