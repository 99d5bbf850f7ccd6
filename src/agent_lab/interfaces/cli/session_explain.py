"""``agent-lab sessions show --explain``: per turn, what the model saw, what is stored
and what the user was shown, side by side, with their differences and the repairs a
restore applied (the rows of ``agent_lab.interfaces.explain_view``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent_lab.interfaces.cli.render import short

Row = Mapping[str, Any]


def print_explained(console: Console, explained: Sequence[Row]) -> None:
    """Per turn, three columns: what the model saw, what is stored, what was shown."""
    for turn in explained:
        table = Table(
            title=f"turn {turn['turn_index']} · {turn['status']}",
            box=box.SIMPLE_HEAVY,
            expand=True,
        )
        for column in ("what the model saw", "what is stored", "what the user was shown"):
            table.add_column(column, ratio=1, overflow="fold")
        table.add_row(_saw(turn["model_saw"]), _stored(turn["stored"]), _shown(turn["shown"]))
        console.print(table)
        for difference in turn["differences"]:
            console.print(Text(f"  ≠ {_difference(difference)}", style="bold yellow"))
        for repair in turn["repairs"]:
            console.print(Text(f"  ⚒ restore: {_repair(repair)}", style="bold magenta"))
        if not turn["differences"] and not turn["repairs"]:
            console.print(Text("  = no differences, no repairs", style="dim"))


def _saw(requests: Sequence[Row]) -> Text:
    text = Text()
    for request in requests:
        offered = request["tools"] or request["events"]
        text.append(f"{request['audit']} (round {request['round_index']})\n", style="bold")
        for message in request["messages"]:
            label = message["role"] + (f"/{message['name']}" if message.get("name") else "")
            text.append(f" {label}: {short(message['content'], 70)}\n")
        if offered:
            text.append(f" offered: {', '.join(offered)}\n", style="cyan")
    return text


def _stored(stored: Row) -> Text:
    text = Text()
    for message in stored["messages"]:
        state = message.get("state", "committed")
        flag = "" if state == "committed" else f" [{state}]"
        text.append(
            f"#{message.get('seq')} {message['role']}{flag}: {short(message['content'], 70)}\n"
        )
    for batch in stored["batches"]:
        calls = ", ".join(f"{c['name']} {c['state']}" for c in batch["calls"])
        text.append(f"batch round {batch['round_index']} {batch['state']}: {calls}\n", style="cyan")
    return text


def _shown(shown: Sequence[Row]) -> Text:
    text = Text()
    for entry in shown:
        if entry.get("failure"):
            failure = entry["failure"]
            text.append(f"✗ {failure['reason']}: {failure['message']}\n", style="red")
            continue
        text.append(f"round {entry['round_index']}: {short(entry['text'], 90)}\n")
        for tool in entry["tools"]:
            text.append(f" ⚡ {tool['name']} {tool['status']}\n", style="cyan")
    return text


def _difference(difference: Row) -> str:
    kind = difference["kind"]
    if kind == "shown_not_stored":
        where = f"round {difference['round_index']}"
        return f"shown but not stored ({where}): {short(difference['text'], 80)}"
    if kind == "stored_not_committed":
        return f"stored row #{difference['seq']} is {difference['state']}, not committed"
    if kind == "stored_not_sent_next_turn":
        return (
            f"stored row #{difference['seq']} ({difference['role']}) was not sent in the next turn"
        )
    who = difference.get("name") or difference.get("role")
    return f"sent to the model but not in the transcript ({who}): {short(difference['text'], 80)}"


def _repair(repair: Row) -> str:
    if repair["kind"] == "repaired_row":
        return f"row #{repair.get('seq')} {repair.get('problem')} → {repair.get('repair')}"
    name = repair.get("event_name") or repair.get("name") or repair.get("event_id")
    return f"recovered call {name}: {repair.get('outcome') or repair.get('state') or repair}"
