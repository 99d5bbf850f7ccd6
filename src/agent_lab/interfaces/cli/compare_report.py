"""Writes the ``agent-lab compare`` report: Markdown, an HTML page and an SVG plot.

The latency plot is drawn with matplotlib's object-oriented API (no pyplot, no global
backend) and embedded inline in the HTML page; the Markdown file links the SVG file
written next to it.
"""

from __future__ import annotations

import html
import io
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.application.pricing import format_usd
from agent_lab.interfaces.cli.compare import (
    COST_METRIC,
    SESSION_METRICS,
    TURN_METRICS,
    WARM_METRICS,
    MetricStats,
    SessionRun,
    cold_left_out,
)
from agent_lab.scenarios import Scenario

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["CompareResult", "ReportFiles", "left_out_note", "stats_rows", "write_report"]

_COLORS = {"dual_agent": "#1f77b4", "chat_agent_tools": "#ff7f0e"}


@dataclass(frozen=True)
class CompareResult:
    """Everything a report shows."""

    scenario: Scenario
    endpoint: str
    repeat: int
    modes: Sequence[ToolInvocationMode]
    runs: Sequence[SessionRun]
    stats: dict[ToolInvocationMode, dict[str, MetricStats]]
    started_at: datetime


@dataclass(frozen=True)
class ReportFiles:
    """The files one report consists of."""

    markdown: Path
    html: Path
    plot: Path


def stats_rows(result: CompareResult) -> list[tuple[str, list[str]]]:
    """One row per metric: ``median / p90`` for every mode."""
    rows = []
    for label, _ in (*TURN_METRICS, *WARM_METRICS, *SESSION_METRICS):
        rows.append((label, [_cell(result.stats[mode][label], label) for mode in result.modes]))
    if any(run.failures for run in result.runs):  # the figures above include them
        rows.append(("failed turns", [_failed(result, mode) for mode in result.modes]))
    return rows


def _failed(result: CompareResult, mode: str) -> str:
    runs = [run for run in result.runs if run.mode == mode]
    failed = sum(len(run.failures) for run in runs)
    return f"{failed} of {sum(len(run.turns) for run in runs)}"


def _cell(stats: MetricStats, label: str = "") -> str:
    if label == COST_METRIC:
        if stats.unknown or stats.median is None or stats.p90 is None:
            return "unknown"  # never $0 for a model without a price
        return f"{_usd(stats.median)} / {_usd(stats.p90)}"
    if stats.unreported_calls and (stats.median is None or stats.p90 is None):
        return "not reported"
    if stats.median is None or stats.p90 is None:
        return "–"
    if stats.lower_bound:  # sessions with calls whose provider sent no usage
        calls = stats.unreported_calls
        note = f"{calls} call{'' if calls == 1 else 's'} not reported"
        return f"≥ {_number(stats.median)} / ≥ {_number(stats.p90)} ({note})"
    return f"{_number(stats.median)} / {_number(stats.p90)}"


def left_out_note(result: CompareResult) -> str | None:
    """Which scenario turns the "cold left out" rows leave out (in every mode)."""
    pairs = cold_left_out(result.runs, result.modes)
    if not pairs:
        return None
    turns = ", ".join(f"turn {turn} of repetition #{repetition}" for repetition, turn in pairs)
    return f'The "cold left out" rows leave out {turns}, in every mode.'


def _usd(value: float) -> str:
    return format_usd(Decimal(str(value)))


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def write_report(result: CompareResult, out_dir: Path) -> ReportFiles:
    """Write the Markdown, HTML and SVG files into ``out_dir`` (created if missing)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = _claim_stem(
        out_dir, f"compare-{_slug(result.scenario.name)}-{result.started_at:%Y%m%d-%H%M%S}"
    )
    files = ReportFiles(
        out_dir / f"{stem}.md", out_dir / f"{stem}.html", out_dir / f"{stem}-latency.svg"
    )
    svg = latency_plot_svg(result)
    files.plot.write_text(svg, encoding="utf-8")
    files.markdown.write_text(_markdown(result, files.plot.name), encoding="utf-8")
    files.html.write_text(_html(result, svg), encoding="utf-8")
    return files


def _claim_stem(out_dir: Path, base: str) -> str:
    """``base``, or ``base-2``, ``base-3``…: the first whose Markdown file this call
    creates (exclusively), so campaigns started in the same second never share files."""
    for attempt in itertools.count(1):
        stem = base if attempt == 1 else f"{base}-{attempt}"
        try:
            (out_dir / f"{stem}.md").open("x", encoding="utf-8").close()
        except FileExistsError:
            continue
        return stem
    raise AssertionError("unreachable")  # pragma: no cover - count() never ends


def _slug(name: str) -> str:
    cleaned = "".join(char if char.isalnum() or char in "-_" else "-" for char in name)
    return cleaned.strip("-") or "scenario"


def _markdown(result: CompareResult, plot_name: str) -> str:
    modes = list(result.modes)
    lines = [
        f"# Compare: {result.scenario.name}",
        "",
        result.scenario.description,
        "",
        f"- started: {result.started_at:%Y-%m-%d %H:%M:%S}",
        f"- endpoint: {result.endpoint}",
        f"- repetitions: {result.repeat}, user turns per session: {len(result.scenario.turns)}",
        "",
        "Median / p90 per mode (latencies per turn, counts per session).",
        "",
        "| metric | " + " | ".join(modes) + " |",
        "|---|" + "---:|" * len(modes),
    ]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in stats_rows(result)]
    note = left_out_note(result)
    lines += ["", note] if note else []
    lines += ["", f"![latency per mode]({plot_name})", "", "## Sessions", ""]
    lines += [f"- `{run.session_id}` {run.mode}" + _errors_note(run) for run in result.runs]
    return "\n".join(lines) + "\n"


def _errors_note(run: SessionRun) -> str:
    cold = [turn.turn_index for turn in run.turns if turn.cold]
    note = f" — cold: turn {cold[0]} made the process's first model call" if cold else ""
    if run.errors:
        note += f" — {len(run.errors)} failed turn(s): {run.errors[0]}"
    return note


def _html(result: CompareResult, svg: str) -> str:
    esc = html.escape
    header = "".join(f"<th>{esc(mode)}</th>" for mode in result.modes)
    body = "".join(
        f"<tr><th>{esc(label)}</th>" + "".join(f"<td>{esc(cell)}</td>" for cell in cells) + "</tr>"
        for label, cells in stats_rows(result)
    )
    sessions = "".join(
        f"<li><code>{esc(str(run.session_id))}</code> {esc(run.mode)}{esc(_errors_note(run))}</li>"
        for run in result.runs
    )
    return _PAGE.format(
        title=esc(f"Compare: {result.scenario.name}"),
        description=esc(result.scenario.description),
        started=f"{result.started_at:%Y-%m-%d %H:%M:%S}",
        endpoint=esc(result.endpoint),
        repeat=result.repeat,
        turns=len(result.scenario.turns),
        header=header,
        body=body,
        note=f"<p>{esc(note)}</p>" if (note := left_out_note(result)) else "",
        plot=_inline_svg(svg),
        sessions=sessions,
    )


def _inline_svg(svg: str) -> str:
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 960px; color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; }}
th, td {{ border: 1px solid #ccc; padding: .35rem .7rem; }}
td {{ text-align: right; font-variant-numeric: tabular-nums; }}
thead th {{ background: #f4f4f4; }}
figure {{ margin: 1.5rem 0; }} svg {{ max-width: 100%; height: auto; }}
</style></head>
<body>
<h1>{title}</h1>
<p>{description}</p>
<p>Started {started} · {endpoint} · {repeat} repetition(s) · {turns} user turn(s)</p>
<p>Median / p90 per mode (latencies per turn, counts per session).</p>
<table><thead><tr><th>metric</th>{header}</tr></thead><tbody>{body}</tbody></table>
{note}
<figure>{plot}<figcaption>Latency per mode</figcaption></figure>
<h2>Sessions</h2><ul>{sessions}</ul>
</body></html>
"""


def latency_plot_svg(result: CompareResult) -> str:
    """Box plots of visible and provider TTFT, and median wall time per turn, as SVG."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4), layout="constrained")
    left, right = figure.subplots(1, 2)
    _ttft_boxes(left, result)
    _wall_time_lines(right, result)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    return buffer.getvalue()


def _ttft_boxes(axes: Axes, result: CompareResult) -> None:
    data, labels, colors = [], [], []
    for mode in result.modes:
        turns = [turn for run in result.runs if run.mode == mode for turn in run.turns]
        for kind, name in (("visible", "visible_ttft_ms"), ("provider", "provider_ttft_ms")):
            values = [getattr(turn, name) for turn in turns if getattr(turn, name) is not None]
            data.append(values or [0])
            labels.append(f"{mode}\n{kind}")
            colors.append(_COLORS.get(mode, "#888888"))
    plot = axes.boxplot(data, patch_artist=True)
    for patch, color in zip(plot["boxes"], colors, strict=True):
        patch.set_facecolor(color)
        patch.set_alpha(0.5)
    axes.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
    axes.set_ylabel("ms")
    axes.set_title("time to first token")


def _wall_time_lines(axes: Axes, result: CompareResult) -> None:
    for mode in result.modes:
        by_turn: dict[int, list[int]] = {}
        for run in (run for run in result.runs if run.mode == mode):
            for turn in run.turns:
                if turn.wall_time_ms is not None:
                    by_turn.setdefault(turn.turn_index, []).append(turn.wall_time_ms)
        indexes = sorted(by_turn)
        medians = [statistics.median(by_turn[index]) for index in indexes]
        axes.plot(indexes, medians, marker="o", label=mode, color=_COLORS.get(mode))
    axes.set_xlabel("user turn")
    axes.set_ylabel("ms (median)")
    axes.set_title("turn wall time")
    axes.legend()
