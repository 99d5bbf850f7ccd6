"""Merging a partial run (``--only``) into an existing ``RESULTS.md``.

The sections of the benchmarks that ran replace their old sections (matched by
heading), the others are kept as they were, and the summary table keeps the old rows of
the benchmarks that did not run, so the file always covers the whole suite. Each
section's ``Command:`` line names the date and load of its own run.
"""

from __future__ import annotations

import re

_TARGETS = re.compile(r"^Targets \((\d+) of (\d+) met\)$")


def split(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """The lines before the first ``## `` heading, and each section's lines by heading."""
    preamble: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is None:
            preamble.append(line)
        else:
            current.append(line)
    return preamble, sections


def _table_rows(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("| ") and not line.startswith("| benchmark")]


def _targets_heading(sections: dict[str, list[str]]) -> str | None:
    return next((name for name in sections if _TARGETS.match(name)), None)


def merge(old_text: str, new_text: str) -> str:
    """``new_text`` (a partial run) merged into ``old_text`` (the full file)."""
    _, old = split(old_text)
    preamble, new = split(new_text)
    old_targets, new_targets = _targets_heading(old), _targets_heading(new)
    new_rows = _table_rows(new[new_targets]) if new_targets else []
    ran = {row.split("|")[1].strip() for row in new_rows}
    kept = [r for r in _table_rows(old[old_targets]) if r.split("|")[1].strip() not in ran]
    rows = kept + new_rows
    met = sum(1 for row in rows if row.rstrip(" |").endswith("| met"))
    judged = sum(1 for row in rows if row.rstrip(" |").split("|")[-1].strip() != "–")
    merged: dict[str, list[str]] = {}
    for name, lines in old.items():
        if name == old_targets:
            merged[f"Targets ({met} of {judged} met)"] = _targets_table(new, new_targets, rows)
        elif name == "Machine" and "Machine" in new:
            merged[name] = new["Machine"] + [
                "Sections this run did not include keep their results from earlier runs; the",
                "`Command:` line of each section gives the date and load of its own run.",
                "",
            ]
        else:
            merged[name] = new.get(name, lines)
    for name, lines in new.items():
        if name not in merged and name != new_targets:
            merged[name] = lines
    out = [*preamble]
    for name, lines in merged.items():
        out += [f"## {name}", *lines]
        if out[-1] != "":
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _targets_table(
    new: dict[str, list[str]], new_targets: str | None, rows: list[str]
) -> list[str]:
    header = ["", "| benchmark | metric | measured | target | verdict |", "|---|---|---|---|---|"]
    if new_targets is not None:
        found = [line for line in new[new_targets] if line.startswith("| benchmark")]
        at = new[new_targets].index(found[0]) if found else -1
        if at >= 0:
            header = ["", *new[new_targets][at : at + 2]]
    return [*header, *rows, ""]
