"""Rich rendering of the output protocol (DESIGN.md §4) and of the lab's tables.

``ConversationRenderer`` prints a live conversation: streamed assistant text, events,
tool results, round-stats chips and, on request, the audit timeline.
``JsonLinesWriter`` prints the same protocol as JSON lines. The ``*_table`` functions
build the tables of ``demo``, ``compare`` and ``sessions``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import IO, Any

import orjson
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent_lab.application.protocol import (
    AuditMessage,
    EventMessage,
    OutputMessage,
    RoundStatsMessage,
    ToolResultMessage,
    UsageMessage,
)
from agent_lab.application.record.fold import TurnRecordBuilder

__all__ = [
    "ConversationRenderer",
    "JsonLinesWriter",
    "TurnTokens",
    "audit_timeline_table",
    "cut_off_text",
    "metric_table",
    "round_chip",
    "sessions_table",
    "short",
    "transcript_lines",
    "tokens_text",
    "turn_metrics_table",
]

_RESULT_PREVIEW = 110
_ROLE_STYLES = {"user": "bold cyan", "assistant": "bold green", "tool": "magenta", "system": "dim"}


_CUT_OFF_WHY = {
    "length": "the model reached its max_tokens limit",
    "content_filter": "the provider's content filter stopped it",
}


def cut_off_text(finish_reason: object) -> str | None:
    """``✂ answer cut off: the model reached its max_tokens limit (finish_reason
    length)`` for a finish reason that cut an answer off, else ``None``."""
    why = _CUT_OFF_WHY.get(finish_reason) if isinstance(finish_reason, str) else None
    return f"✂ answer cut off: {why} (finish_reason {finish_reason})" if why else None


def short(text: str, limit: int = _RESULT_PREVIEW) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class TurnTokens:
    """A turn's tokens summed from its ``usage`` outputs: every model call of the turn,
    the chat rounds and the event agent's argument calls alike, as its stored record
    (``sessions show``, exports) counts them. Its audits (``observe``) say which calls
    reported no usage, so the figure says so as ``sessions show`` does."""

    total: int = 0
    cached: int = 0
    reported: bool = False
    """A ``usage`` output arrived (else the figure reads "not reported", not zero)."""
    _calls: TurnRecordBuilder = field(
        default_factory=lambda: TurnRecordBuilder(0), repr=False, compare=False
    )
    """The turn's model calls, folded from its audits as its stored record is."""

    def observe(self, message: OutputMessage) -> None:
        """Take one output message of the turn (its ``usage`` and ``audit`` messages)."""
        if message["type"] == "usage":
            self.add(message)
        elif message["type"] == "audit":
            self._calls.add(message["event"], message["details"])

    def add(self, message: UsageMessage) -> None:
        self.total += message["usage"]["total_tokens"]
        self.cached += message["usage"]["cached_tokens"]
        self.reported = True

    @property
    def unreported_calls(self) -> int:
        """The turn's model calls (seen in its audits) whose provider sent no usage."""
        return sum(call.usage is None for call in self._calls.build().model_calls)

    def describe(self) -> str:
        """``590 tok (0 cached)``, ``55 tok (0 cached), 1 call(s) not reported`` (as
        ``sessions show`` says it), or ``tokens not reported``."""
        if not self.reported:
            return "tokens not reported"
        text = f"{self.total} tok ({self.cached} cached)"
        unreported = self.unreported_calls
        return f"{text}, {unreported} call(s) not reported" if unreported else text


def round_chip(message: RoundStatsMessage, *, usage_reported: bool = True) -> Text:
    """The one-line stats chip of a ``round_stats`` message: its tokens are the round's
    chat call's (an argument call's count in the turn's total, ``TurnTokens``).

    ``usage_reported=False`` (no ``usage`` message in the round) shows the tokens as not
    reported rather than as zero.
    """
    ttft = message["ttft_ms"]
    tokens = (
        f"{message['total_tokens']} chat tok ({message['cached_tokens']} cached)"
        if usage_reported
        else "chat tokens not reported"
    )
    parts = [
        f"round {message['round_index']}",
        f"TTFT {ttft} ms" if ttft is not None else "no text",
        f"{message['elapsed_ms']} ms",
        tokens,
    ]
    if message["had_event"]:
        parts.append("tools")
    return Text("  [" + " · ".join(parts) + "]", style="dim")


@dataclass(eq=False)
class ConversationRenderer:
    """Prints output-protocol messages as they arrive.

    ``error`` messages are left to the caller, which decides where they go.
    """

    console: Console
    """Where to print (usually stdout)."""
    _: KW_ONLY
    show_audits: bool = False
    """Also print one dim line per ``audit`` message."""
    show_stats: bool = True
    """Print the round-stats chip after every round."""
    session_id: str | None = field(default=None, init=False)
    """The session of the conversation, once ``session_started`` named it."""
    turn_tokens: TurnTokens = field(default_factory=TurnTokens, init=False)
    """The tokens of the turn in progress (or of the last one), every model call's."""
    _line_open: bool = field(default=False, init=False)
    _usage_seen: bool = field(default=False, init=False)
    """The round's chat call reported usage (the chip's tokens are its)."""
    _chat_call_open: bool = field(default=True, init=False)
    """Until the round's ``chat_agent_response`` audit: a ``usage`` is the chat call's."""

    def render(self, message: OutputMessage) -> None:
        """Print one output message."""
        if message["type"] == "message_delta":
            self._delta(message["content"])
        elif message["type"] == "usage":
            self._usage_seen = self._usage_seen or self._chat_call_open
            self.turn_tokens.observe(message)
        elif message["type"] == "event":
            self.end_line()
            self._event(message)
        elif message["type"] == "tool_result":
            self.end_line()
            self._tool_result(message)
        elif message["type"] == "round_stats":
            self.end_line()
            self._round_stats(message)
        elif message["type"] == "session_started":
            self.end_line()
            if "session_id" in message:
                self.session_id = message["session_id"]
                self.console.print(Text(f"session {message['session_id']}", style="dim"))
        elif message["type"] == "audit":
            self.end_line()
            self._audit(message)
        elif message["type"] == "turn_started":
            self.end_line()
            self.turn_tokens = TurnTokens()
        elif message["type"] in ("turn_completed", "done"):
            self.end_line()

    def user(self, text: str) -> None:
        """Print a user message, as the chat echo of a turn."""
        self.end_line()
        self.console.print(Text.assemble(("you› ", "bold cyan"), text))

    def note(self, text: str, style: str = "dim") -> None:
        """Print a one-line remark in the conversation (e.g. ``turn cancelled``)."""
        self.end_line()
        self.console.print(Text(text, style=style))

    def end_line(self) -> None:
        """Finish the assistant line being streamed, if any."""
        if self._line_open:
            self.console.print()
            self._line_open = False

    def _delta(self, content: str) -> None:
        if not content:
            return
        if not self._line_open:
            self.console.print(Text("assistant› ", style="bold green"), end="")
            self._line_open = True
        self.console.print(Text(content), end="")

    def _event(self, message: EventMessage) -> None:
        event = message["event"]
        arguments = event["arguments"]
        shown = f" {short(json.dumps(arguments, ensure_ascii=False))}" if arguments else ""
        self.console.print(Text(f"  ⚡ event {event['name']}{shown}", style="cyan"))

    def _tool_result(self, message: ToolResultMessage) -> None:
        result = message["message"]
        content = result["content"]
        style = "red" if '"error"' in content else "magenta"
        self.console.print(Text(f"  ↳ {result['name']}: {short(content)}", style=style))

    def _round_stats(self, message: RoundStatsMessage) -> None:
        if self.show_stats:
            self.console.print(round_chip(message, usage_reported=self._usage_seen))
        self._usage_seen = False

    def _audit(self, message: AuditMessage) -> None:
        self.turn_tokens.observe(message)
        if message["event"] in ("chat_round_started", "chat_agent_response"):
            self._chat_call_open = message["event"] == "chat_round_started"
        if message["event"] == "chat_agent_response":
            call = message["details"].get("call")
            cut_off = cut_off_text(call.get("finish_reason") if isinstance(call, dict) else None)
            if cut_off is not None:  # the answer above is not all the model meant to say
                self.console.print(Text(f"  {cut_off}", style="bold yellow"))
        if not self.show_audits:
            return
        elapsed = message["details"]["turn_elapsed_ms"]
        self.console.print(Text(f"  · +{elapsed} ms {message['event']}", style="dim blue"))


class JsonLinesWriter:
    """Writes output-protocol messages as JSON lines (audits only when asked)."""

    def __init__(self, stream: IO[str], *, audits: bool = False) -> None:
        self.stream = stream
        self.audits = audits

    def render(self, message: OutputMessage) -> None:
        """Write one message as a line, unless it is an audit nobody asked for."""
        if message["type"] == "audit" and not self.audits:
            return
        self.stream.write(orjson.dumps(message, default=str).decode() + "\n")
        self.stream.flush()


def metric_table(
    title: str, columns: Sequence[str], rows: Iterable[tuple[str, Sequence[str]]]
) -> Table:
    """A table with a metric name column and one right-aligned column per ``columns``."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric", style="bold")
    for column in columns:
        table.add_column(column, justify="right")
    for name, values in rows:
        table.add_row(name, *values)
    return table


def sessions_table(sessions: Sequence[Mapping[str, Any]]) -> Table:
    """The ``sessions list`` table, newest first."""
    table = Table(title="sessions", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True, min_width=32)
    table.add_column("title", no_wrap=True, overflow="ellipsis", ratio=1, min_width=12)
    table.add_column("mode", no_wrap=True, min_width=16)
    table.add_column("turns", justify="right", no_wrap=True, min_width=5)
    table.add_column("updated", no_wrap=True, min_width=16)
    table.add_column("live", no_wrap=True, min_width=4)
    for session in sessions:
        table.add_row(
            str(session["id"]),
            Text(str(session.get("title") or "")),  # a title is text, never markup
            str(session.get("mode") or ""),
            str(session.get("turn_count", "")),
            str(session.get("updated_at") or "")[:16].replace("T", " "),
            "live" if session.get("held_by") else "",
        )
    return table


def transcript_lines(messages: Sequence[Mapping[str, Any]]) -> list[Text]:
    """One line per persisted message: turn, role and content (tool calls named)."""
    lines = []
    for message in messages:
        role = str(message.get("role"))
        body = str(message.get("content") or "")
        calls = message.get("tool_calls") or []
        if calls:
            body += " " + " ".join(f"→{call.get('name')}" for call in calls)
        if role == "tool":
            body = f"{message.get('name')}: {short(body)}"
        label = f"[{message.get('turn_index')}] {role:9}"
        lines.append(Text.assemble((label, _ROLE_STYLES.get(role, "")), " ", body))
    return lines


def turn_metrics_table(summary: Mapping[str, Any]) -> Table:
    """Per-turn metrics from ``usage_summary`` (with provider TTFT of the first call)."""
    first_ttft = _first_chat_ttft(summary.get("calls") or [])
    table = Table(title="turns", title_justify="left")
    columns = ("turn", "status", "rounds", "provider TTFT ms", "wall ms", "model calls")
    for column in (*columns, "fallbacks", "tools", "tokens (cached)"):
        table.add_column(column, justify="right" if column not in ("status",) else "left")
    for turn in summary.get("turns") or []:
        ttft = first_ttft.get(turn["turn_index"])
        table.add_row(
            str(turn["turn_index"]),
            str(turn.get("status") or ""),
            _text(turn.get("round_count")),
            _text(ttft),
            _text(turn.get("turn_wall_time_ms")),
            str(turn.get("model_calls", 0)),
            str(turn.get("fallback_count", 0)),
            str(turn.get("tool_count", 0)),
            tokens_text(turn),
        )
    return table


def tokens_text(totals: Mapping[str, Any]) -> str:
    """``total (cached)`` tokens, saying so when the provider reported no usage."""
    text = f"{totals.get('total_tokens', 0)} ({totals.get('cached_tokens', 0)})"
    unreported = int(totals.get("unreported_usage_calls", 0))
    if unreported and unreported >= int(totals.get("model_calls", 0)):
        return "not reported"
    if unreported:
        return f"{text}, {unreported} call(s) not reported"
    return text


def audit_timeline_table(audits: Sequence[Mapping[str, Any]]) -> Table:
    """The audit timeline: turn, turn-relative milliseconds, event and a short detail."""
    table = Table(title="audit timeline", title_justify="left")
    table.add_column("turn", justify="right")
    table.add_column("+ms", justify="right")
    table.add_column("event")
    table.add_column("details", style="dim")
    for audit in audits:
        details = audit.get("details") or {}
        table.add_row(
            _text(audit.get("turn_index")),
            _text(details.get("turn_elapsed_ms")),
            str(audit.get("event")),
            _audit_detail(details),
        )
    return table


def _audit_detail(details: Mapping[str, Any]) -> str:
    parts = []
    if "round_index" in details:
        parts.append(f"round {details['round_index']}")
    names = details.get("event_names")
    if names:
        parts.append(", ".join(str(name) for name in names))
    event = details.get("event")
    if isinstance(event, dict) and event.get("name"):
        parts.append(str(event["name"]))
    for key in ("status", "result_count", "round_count"):
        if key in details:
            parts.append(f"{key}={details[key]}")
    return " · ".join(parts)


def _first_chat_ttft(calls: Iterable[Mapping[str, Any]]) -> dict[int, int | None]:
    found: dict[int, int | None] = {}
    for call in calls:
        if call.get("call_kind") == "chat" and call.get("round_index") == 1:
            found[int(call["turn_index"])] = call.get("ttft_ms")
    return found


def _text(value: object) -> str:
    return "–" if value is None else str(value)
