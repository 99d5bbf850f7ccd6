"""``agent-lab chat``: an interactive multi-turn session on stdin.

Lines come from a reader thread, so a piped stdin works as well as a terminal; EOF or
``/exit`` ends the session. Ctrl-C cancels the turn in progress through
``DebugRuntime.cancel_turn()``; at the prompt, a second Ctrl-C quits.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Annotated, Final

import typer

from agent_lab.interfaces.cli.common import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_USAGE,
    FILE_REPLACED,
    check_store_file,
    isatty,
    notice,
    on_interrupt,
    open_lab,
    report_failure,
    run_async,
    stdout_console,
)
from agent_lab.interfaces.cli.driver import SessionDriver, TurnEnd
from agent_lab.interfaces.cli.flags import STORE_FLAGS, TURN_FLAGS, lab_flags
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.cli.options import AuditLinesOption
from agent_lab.interfaces.cli.render import ConversationRenderer
from agent_lab.interfaces.cli.run import print_turn_cost, resolve_session

if TYPE_CHECKING:
    from agent_lab.application.contracts import ToolInvocationMode
    from agent_lab.interfaces.lab import Lab

CHAT_HELP = """Chat with the agent, one turn per line, until EOF or /exit.

Ctrl-C cancels the turn in progress; a second Ctrl-C at the prompt quits. Lines can
be piped in. The session is persisted; resume it later with --session ID.

Examples:

  agent-lab chat

  agent-lab chat --mode chat_agent_tools --audit

  printf 'Turn it up by 10\\nGoodbye\\n' | agent-lab chat

  agent-lab chat --session 3f2a                # a unique id prefix is enough
"""

EXIT_COMMANDS: Final = frozenset({"/exit", "/quit"})
INTERRUPT: Final = object()
"""Put on the line queue by Ctrl-C at the prompt."""


@lab_flags(*TURN_FLAGS, "config", "session", *STORE_FLAGS, "audit", "local", "otel")
def chat(
    options: LabOptions,
    session: Annotated[
        str | None, typer.Option("--session", help="Resume this persisted session.")
    ] = None,
    audit: AuditLinesOption = False,
) -> None:
    """Run an interactive multi-turn session (see ``CHAT_HELP``)."""
    run_async(lambda: _chat(options, session, audit=audit))


async def _chat(options: LabOptions, session_id: str | None, *, audit: bool) -> int:
    async with open_lab(options.settings()) as lab:
        session_id, mode, mode_note = resolve_session(lab, options, session_id)
        renderer = ConversationRenderer(stdout_console(), show_audits=audit)
        reader = LineReader(sys.stdin)
        notice(renderer.console, lab.endpoint_description)
        if mode_note:
            notice(renderer.console, mode_note)
        if reader.interactive:
            notice(renderer.console, "one turn per line; /exit or Ctrl-D quits, Ctrl-C cancels")
        loop = ChatLoop(lab, session_id, mode, renderer, reader)
        with on_interrupt(loop.interrupt):
            try:
                code = await loop.run()
                gone = await check_store_file(lab, reported=loop.store_gone)
                return code if gone is None else gone
            finally:
                await loop.driver.aclose()


class LineReader:
    """Reads lines from a stream in a daemon thread; ``None`` marks EOF."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.interactive = isatty(stream)
        self._queue: asyncio.Queue[str | object | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._read, name="agent-lab-stdin", daemon=True).start()

    async def get(self) -> str | object | None:
        """The next line (without its newline), ``None`` at EOF, or ``INTERRUPT``."""
        return await self._queue.get()

    def interrupt(self) -> None:
        """Wake up a ``get()`` with ``INTERRUPT`` (called in the loop on Ctrl-C)."""
        self._queue.put_nowait(INTERRUPT)

    def _read(self) -> None:
        while True:
            try:
                line = self.stream.readline()
            except (OSError, ValueError):
                line = ""
            item = line.rstrip("\r\n") if line else None
            try:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
            except RuntimeError:  # the chat is over and its loop closed
                return
            if item is None:
                return


@dataclass(eq=False)
class ChatLoop:
    """Reads a line, runs it as a turn, shows how it ended, repeats."""

    lab: Lab
    session_id: str | None
    """The session to continue (``None``: the first turn starts a new one)."""
    mode: ToolInvocationMode | None
    renderer: ConversationRenderer
    reader: LineReader
    driver: SessionDriver = field(init=False)
    _interrupts: int = field(default=0, init=False)
    _failed: bool = field(default=False, init=False)
    store_gone: bool = field(default=False, init=False)
    """A turn's error said the store file was deleted or replaced (the chat ended)."""

    def __post_init__(self) -> None:
        self.driver = SessionDriver(self.lab.runtime(), self.renderer.render)

    def interrupt(self) -> None:
        """Ctrl-C: cancel the running turn, or count towards quitting at the prompt."""
        if self.driver.turn_running and self.driver.cancel_turn():
            self.renderer.note("cancelling the turn…", "yellow")
        else:
            self.reader.interrupt()

    async def run(self) -> int:
        """The session: returns the exit code."""
        line = await self._read()
        if line is None:
            return EXIT_OK
        request = self.lab.request(line, session_id=self.session_id, mode=self.mode)
        end = await self.driver.first_turn(request)
        while True:
            code = self._report(end)
            await self._cost(end)
            if code is not None:
                return code
            line = await self._read()
            if line is None:
                return EXIT_RUN_FAILED if self._failed else EXIT_OK
            end = await self.driver.next_turn(line)

    async def _cost(self, end: TurnEnd) -> None:
        """The turn's cost (per role), once it is stored."""
        if end.turn_index is not None:
            await print_turn_cost(self.lab, self.renderer, self.driver.session_id, end.turn_index)

    def _report(self, end: TurnEnd) -> int | None:
        """Show how a turn ended; an exit code when the session cannot go on."""
        if end.status == "cancelled":
            self.renderer.note("turn cancelled", "yellow")
        elif end.status == "failed":
            self.renderer.end_line()
            error = end.error or {"type": "error", "message": "the turn failed"}
            code = report_failure(error)
            self._failed = True
            if code == EXIT_USAGE or end.session_over:
                return code
            if error.get("failure_reason") == FILE_REPLACED:  # no later turn can be saved
                self.renderer.note("the chat has ended: its store file is gone", "yellow")
                self.store_gone = True
                return code
        elif end.round_count is not None:
            self.renderer.note(end.describe())
        if end.session_over:
            self.renderer.note("the session has ended", "yellow")
            return EXIT_RUN_FAILED if self._failed else EXIT_OK
        return None

    async def _read(self) -> str | None:
        while True:
            if self.reader.interactive:
                self.renderer.console.print("you› ", style="bold cyan", end="")
            item = await self.reader.get()
            if item is INTERRUPT:
                self._interrupts += 1
                if self._interrupts > 1:
                    return None
                self.renderer.note("\n(press Ctrl-C again or type /exit to quit)")
                continue
            if item is None or not isinstance(item, str):
                return None
            self._interrupts = 0
            text = item.strip()
            if text in EXIT_COMMANDS:
                return None
            if text:
                if not self.reader.interactive:
                    self.renderer.user(text)
                return text
