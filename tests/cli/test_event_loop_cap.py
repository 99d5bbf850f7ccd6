"""The lab's settings and the CLI take ``max_event_loops``' cap from the request model."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_lab.application.contracts import MAX_EVENT_LOOPS
from agent_lab.interfaces.settings import LabSettings
from tests.cli.cli_helpers import Invoke


def test_settings_accept_the_cap_and_refuse_more() -> None:
    assert LabSettings(max_event_loops=MAX_EVENT_LOOPS).max_event_loops == MAX_EVENT_LOOPS
    with pytest.raises(ValidationError) as raised:
        LabSettings(max_event_loops=MAX_EVENT_LOOPS + 1)
    [error] = raised.value.errors()
    assert error["loc"] == ("max_event_loops",) and error["type"] == "less_than_equal"


def test_the_cli_refuses_more_than_the_cap_as_a_usage_error(cli: Invoke) -> None:
    result = cli("run", "hi", "--max-event-loops", str(MAX_EVENT_LOOPS + 1))

    assert result.exit_code == 2
    assert "--max-event-loops" in result.stderr and str(MAX_EVENT_LOOPS) in result.stderr
