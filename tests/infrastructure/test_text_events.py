"""The streaming parser of inline event blocks, including property tests over chunkings."""

from __future__ import annotations

from itertools import count

from hypothesis import given
from hypothesis import strategies as st

from agent_lab.domain.events import EVENT_BLOCK_END, EVENT_BLOCK_START, ToolCallEvent
from agent_lab.infrastructure.openai_compat.text_events import TextEventParser, TextPiece

START, END = EVENT_BLOCK_START, EVENT_BLOCK_END


def run(*pieces: str) -> tuple[str, list[str], list[TextPiece]]:
    parser = TextEventParser()
    out = [piece for chunk in pieces for piece in parser.feed(chunk)] + parser.finish()
    visible = "".join(piece for piece in out if isinstance(piece, str))
    names = [piece.name for piece in out if isinstance(piece, ToolCallEvent)]
    return visible, names, out


ANSWER = (
    f"Let me book that. {START}calendar.schedule.create, handoff_note{END} "
    f"Done <b>bold</b> a<e {START} session.terminate {END}!"
)


def test_blocks_become_events_and_never_show_marker_text() -> None:
    visible, names, _ = run(ANSWER)
    assert visible == "Let me book that.  Done <b>bold</b> a<e !"
    assert names == ["calendar.schedule.create", "handoff_note", "session.terminate"]


def test_events_have_fresh_ids_and_empty_arguments() -> None:
    _, _, out = run(ANSWER, f"{START}handoff_note{END}")
    events = [piece for piece in out if isinstance(piece, ToolCallEvent)]
    assert len({event.id for event in events}) == len(events) == 4
    assert all(event.id.startswith("evt_") for event in events)
    assert all(event.arguments == {} and event.raw_arguments == "{}" for event in events)


def test_order_of_text_and_events_is_kept() -> None:
    _, _, out = run(f"a{START}x{END}b{START}y{END}c")
    assert [piece if isinstance(piece, str) else piece.name for piece in out] == [
        "a",
        "x",
        "b",
        "y",
        "c",
    ]


def test_every_split_point_gives_the_same_result() -> None:
    expected = run(ANSWER)[:2]
    for cut in range(len(ANSWER) + 1):
        assert run(ANSWER[:cut], ANSWER[cut:])[:2] == expected, cut


def test_one_character_at_a_time_gives_the_same_result() -> None:
    assert run(*ANSWER)[:2] == run(ANSWER)[:2]


def test_holds_back_only_a_possible_marker_prefix() -> None:
    parser = TextEventParser()
    assert parser.feed("Hello <ev") == ["Hello "]
    assert parser.feed("il>") == ["<evil>"]
    assert parser.feed("a < b") == ["a < b"]
    assert parser.feed(" x<") == [" x"]
    assert parser.feed("<") == ["<"]
    assert parser.finish() == ["<"]


def test_text_without_marker_characters_is_passed_through_immediately() -> None:
    parser = TextEventParser()
    assert parser.feed("plain text") == ["plain text"]
    assert parser.finish() == []


def test_block_left_open_at_the_end_still_names_its_events() -> None:
    visible, names, _ = run(f"Sure {START}handoff_note, session.terminate</ev")
    assert visible == "Sure "
    assert names == ["handoff_note", "session.terminate"]


def test_unfinished_start_marker_at_the_end_is_visible_text() -> None:
    assert run("Trailing <eve")[:2] == ("Trailing <eve", [])


def test_empty_names_are_ignored() -> None:
    assert run(f"{START} , ,a,, {END}{START}{END}")[:2] == ("", ["a"])


def test_injected_id_factory() -> None:
    ids = (f"evt_{n}" for n in count())
    parser = TextEventParser(lambda: next(ids))
    out = parser.feed(f"{START}a,b{END}")
    assert [piece.id for piece in out if isinstance(piece, ToolCallEvent)] == ["evt_0", "evt_1"]


def test_parser_resets_after_finish() -> None:
    parser = TextEventParser()
    parser.feed(f"x {START}a")
    parser.finish()
    assert parser.feed("plain") == ["plain"]


# Event names start with a letter, digit or underscore (``.`` alone is no name).
_NAMES = st.from_regex(r"[a-z_][a-z._]{0,11}", fullmatch=True)
_PLAIN = st.text(alphabet=st.sampled_from(list("ab <>/evnt,. \nü")), max_size=20)


@st.composite
def answers(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    """A text with blocks, its visible text and its event names."""
    text, visible, names = "", "", []
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        plain = draw(_PLAIN)
        block = draw(st.lists(_NAMES, min_size=1, max_size=3))
        # Plain text must not itself contain a start marker (that would open a block).
        if START in plain:
            continue
        text += plain + START + ", ".join(block) + END
        visible += plain
        names += block
    tail = draw(_PLAIN)
    if START not in tail:
        text, visible = text + tail, visible + tail
    return text, visible, names


@given(answers(), st.lists(st.integers(min_value=0, max_value=400), max_size=15))
def test_every_chunking_yields_the_same_events_and_visible_text(
    answer: tuple[str, str, list[str]], cuts: list[int]
) -> None:
    text, visible, names = answer
    points = sorted({cut for cut in cuts if cut <= len(text)})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert run(*pieces)[:2] == (visible, names)
    assert run(text)[:2] == (visible, names)


@given(st.text(max_size=60), st.lists(st.integers(min_value=0, max_value=60), max_size=10))
def test_arbitrary_text_is_chunking_independent(text: str, cuts: list[int]) -> None:
    points = sorted({cut for cut in cuts if cut <= len(text)})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert run(*pieces)[:2] == run(text)[:2]


# --- prose that merely contains a start marker ---------------------------------------------

PROSE = (
    "In HTML you would write <event> for this, then describe each part of the day: "
    "breakfast, a walk along the river, lunch with Sam at noon, and a quiet evening."
)


def test_unclosed_marker_in_prose_names_no_events_and_keeps_the_text() -> None:
    visible, names, _ = run(PROSE)
    assert names == []
    assert visible == PROSE


def test_unclosed_marker_in_prose_is_the_same_in_any_chunking() -> None:
    for cut in range(len(PROSE) + 1):
        assert run(PROSE[:cut], PROSE[cut:])[:2] == (PROSE, []), cut
    assert run(*PROSE)[:2] == (PROSE, [])


def test_prose_after_a_marker_is_shown_as_soon_as_it_cannot_be_a_block() -> None:
    parser = TextEventParser()
    assert parser.feed(f"Use {START}") == ["Use "]
    assert parser.feed("get_weather") == []  # still a possible block
    assert parser.feed(" tags to mark") == [START, "get_weather tags to mark"]


def test_closed_block_of_prose_is_shown_verbatim() -> None:
    text = f"a {START}this is not, a list{END} b"
    assert run(text)[:2] == (text, [])


def test_a_real_block_after_a_prose_marker_still_counts() -> None:
    text = f"The {START} tag. {START}handoff_note{END}done"
    assert run(text)[:2] == (f"The {START} tag. done", ["handoff_note"])


def test_names_with_impossible_characters_or_length_are_prose() -> None:
    long_name = "a" * 65
    for block in ("héllo", "a/b", long_name, "x y", "calendar.create!"):
        assert run(f"{START}{block}{END}")[:2] == (f"{START}{block}{END}", []), block
