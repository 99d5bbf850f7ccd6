"""Summarise a py-spy profile: the functions that hold the most samples, in percent.

Record a benchmark with py-spy (``--gil`` keeps only samples that hold the GIL, i.e.
Python CPU), then summarise it, optionally keeping only stacks through a function::

    .venv/bin/py-spy record --gil -r 1000 -f raw -o /tmp/wire.txt -- \\
        .venv/bin/python -m bench --only wire
    .venv/bin/python bench/spy_summary.py /tmp/wire.txt --within stream_round --top 30

"Inclusive" counts every sample with the function anywhere on the stack, "self" only
those where it is the innermost frame. Import-time stacks are dropped.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"(?P<name>.+?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def frame_name(frame: str) -> str:
    match = _FRAME.match(frame)
    if match is None:
        return frame
    path = match["file"].split("site-packages/")[-1].split("/src/")[-1]
    return f"{match['name']} ({path})"


def summarise(path: Path, within: str | None) -> tuple[int, Counter[str], Counter[str]]:
    inclusive: Counter[str] = Counter()
    innermost: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or "_find_and_load" in stack or (within and within not in stack):
            continue
        names = [frame_name(frame) for frame in stack.split(";")]
        total += int(count)
        inclusive.update(dict.fromkeys(names, int(count)))
        innermost[names[-1]] += int(count)
    return total, inclusive, innermost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy output recorded with -f raw")
    parser.add_argument("--within", help="keep only stacks that contain this text")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    total, inclusive, innermost = summarise(args.profile, args.within)
    print(f"{total} samples")
    for title, counter in (("inclusive", inclusive), ("self", innermost)):
        print(f"--- {title}")
        for name, count in counter.most_common(args.top):
            print(f"{100 * count / max(total, 1):5.1f}%  {name}")


if __name__ == "__main__":
    main()
