"""Local search indexes only files that really live inside its corpus folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_lab.application.tools import build_default_tool_registry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.tool_backends.backends import LocalSearchBackend


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "inside.md").write_text("# Inside\nThe harbour opens at dawn.\n", encoding="utf-8")
    return folder


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    outside = tmp_path / "private"
    outside.mkdir()
    path = outside / "passwords.md"
    path.write_text("# Passwords\nThe harbour vault code is 4711.\n", encoding="utf-8")
    return path


@pytest.mark.asyncio
async def test_a_symlinked_file_pointing_out_of_the_corpus_is_not_indexed(
    corpus: Path, secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (corpus / "leak.md").symlink_to(secret)
    monkeypatch.setenv("AGENT_LAB_CORPUS", str(corpus))
    registry = build_default_tool_registry()
    event = ToolCallEvent(id="c-1", name="knowledge.web.search", arguments={"query": "harbour"})

    outcome = await registry.run(event)

    assert outcome.ok, outcome.payload
    assert outcome.payload["sources"] == ["inside.md"]
    assert "4711" not in str(outcome.payload)


def test_a_symlinked_folder_pointing_out_of_the_corpus_is_not_indexed(
    corpus: Path, secret: Path, agent_lab_home: Path
) -> None:
    (corpus / "linked").symlink_to(secret.parent, target_is_directory=True)
    search = LocalSearchBackend(agent_lab_home, corpus_dir=corpus)

    hits = search.search("vault code", limit=5)

    assert hits == []


def test_a_symlink_that_stays_inside_the_corpus_is_indexed(
    corpus: Path, agent_lab_home: Path
) -> None:
    (corpus / "alias.md").symlink_to(corpus / "inside.md")
    search = LocalSearchBackend(agent_lab_home, corpus_dir=corpus)

    hits = search.search("harbour", limit=5)

    assert sorted(hit.source for hit in hits) == ["alias.md", "inside.md"]


def test_a_link_redirected_out_of_the_corpus_after_indexing_is_dropped(
    corpus: Path, secret: Path, agent_lab_home: Path
) -> None:
    (corpus / "notes.md").write_text("# Notes\nNothing about the vault.\n", encoding="utf-8")
    search = LocalSearchBackend(agent_lab_home, corpus_dir=corpus)
    assert [hit.source for hit in search.search("vault", limit=5)] == ["notes.md"]
    (corpus / "notes.md").unlink()
    (corpus / "notes.md").symlink_to(secret)

    hits = search.search("vault", limit=5)

    assert hits == []
