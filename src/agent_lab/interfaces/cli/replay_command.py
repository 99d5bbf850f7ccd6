"""``agent-lab replay``: re-run a session against its recorded chunks and diff it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from agent_lab.interfaces.cli.common import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    run_async,
    stdout_console,
)
from agent_lab.interfaces.cli.driver import TurnEnd, TurnHooks
from agent_lab.interfaces.cli.flags import STORE_FLAGS, lab_flags
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.cli.options import repeatable
from agent_lab.interfaces.cli.render import ConversationRenderer
from agent_lab.interfaces.cli.session_ids import find_session
from agent_lab.interfaces.cli.session_queries import open_store

if TYPE_CHECKING:
    from agent_lab.interfaces.cli.replay import ReplayReport

REPLAY_HELP = """Re-run a saved session against the model chunks recorded in its audit.

The current code parses the recorded chunks, resolves arguments and runs the tools
again (on a temporary copy of their state, into a temporary database: the saved
session is never changed), keeping the recorded timing scaled by --speed. Then the
visible text, events, tool results (ids and timestamps ignored) and round counts of
every turn are compared with the recording. Exit code 0 when identical, 1 when not.

Examples:

  agent-lab replay 3f2a...

  agent-lab replay 3f2a... --speed 4           # four times as fast

  agent-lab replay 3f2a... --speed 0 --quiet   # no waiting, report only
"""


@lab_flags("session_id", "speed", "quiet", "ignore_key", "config", *STORE_FLAGS)
def replay(
    options: LabOptions,
    session_id: Annotated[str, typer.Argument(help="The session to replay.", show_default=False)],
    speed: Annotated[
        float,
        typer.Option("--speed", min=0.0, help="Timing scale: 2 is twice as fast, 0 no waiting."),
    ] = 1.0,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only print the comparison.")
    ] = False,
    ignore_key: Annotated[
        list[str] | None,
        repeatable("--ignore-key", "Also ignore this key in tool results (repeatable)."),
    ] = None,
) -> None:
    """Replay a session and report differences (see ``REPLAY_HELP``)."""
    ignore = frozenset(ignore_key or ())
    run_async(lambda: _replay(options, session_id, speed, quiet=quiet, ignore=ignore))


async def _replay(
    options: LabOptions, session_id: str, speed: float, *, quiet: bool, ignore: frozenset[str]
) -> int:
    console = stdout_console()
    hooks = TurnHooks() if quiet else _live(ConversationRenderer(console))
    from agent_lab.interfaces.cli.replay import replay_session

    with open_store(options.settings(), reading=True) as store:
        session_id = str(find_session(store, session_id)["id"])
        report = await replay_session(store, session_id, speed=speed, hooks=hooks, ignore=ignore)
    print_report(console, report, ignore)
    return EXIT_OK if report.identical else EXIT_RUN_FAILED


def _live(renderer: ConversationRenderer) -> TurnHooks:
    def after_turn(end: TurnEnd) -> None:
        renderer.note(end.describe(), "red" if end.error else "dim")

    return TurnHooks(renderer.render, renderer.user, after_turn)


def print_report(
    console: Console, report: ReplayReport, ignored: frozenset[str] = frozenset()
) -> None:
    """The notes, the verdict, then one entry per difference and a hint for tool state."""
    console.rule("replay")
    for note in report.notes:
        console.print(f"note: {note}", style="yellow", markup=False)
    if report.identical:
        console.print(
            f"[green]identical[/green]: {report.turns} turn(s) of session {report.session_id} "
            "reproduced the recorded text, events, tool results and rounds"
        )
        return
    console.print(f"[red]{len(report.differences)} difference(s)[/red] from the recording:")
    for difference in report.differences:
        console.print(f"  - {difference}", markup=False)
    if report.differing_keys:
        console.print(tool_state_hint(report, ignored), markup=False)


def tool_state_hint(report: ReplayReport, ignored: frozenset[str]) -> str:
    """Why tool results can differ, and the command that ignores the differing keys."""
    flags = " ".join(f"--ignore-key {key}" for key in sorted({*ignored, *report.differing_keys}))
    return (
        "hint: the replay runs the tools on a fresh state, while the recorded session ran on"
        " the tool state it found (for example a volume set earlier), so state-dependent"
        f" fields ({', '.join(report.differing_keys)}) can differ. If those are the only"
        f" differences, ignore them: agent-lab replay {report.session_id} {flags}"
    )
