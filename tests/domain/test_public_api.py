"""The root package re-exports the public API named in the design, lazily."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import agent_lab


@pytest.mark.parametrize("name", sorted(set(agent_lab.__all__) - {"__version__"}))
def test_each_public_name_is_the_layered_modules_object(name: str) -> None:
    module = importlib.import_module(agent_lab._EXPORTS[name])
    assert getattr(agent_lab, name) is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = agent_lab.Nope


def test_importing_the_package_loads_neither_the_sdk_nor_the_runtime() -> None:
    # Only the composition root and the seam it registers the default tool backends
    # with are loaded; the adapters themselves are imported on first use.
    code = (
        "import sys, agent_lab; "
        "print(sorted(m for m in sys.modules if m.startswith(('openai', 'agent_lab.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(
        ["agent_lab.application", "agent_lab.application.builtin_defaults", "agent_lab.defaults"]
    )


def test_python_dash_m_agent_lab_runs_the_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agent_lab", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0
    assert "agent-lab" in out.stdout or "Agent Lab" in out.stdout


def test_the_errors_the_docs_tell_users_to_catch_are_public() -> None:
    for name in (
        "InvalidRequest",
        "UnknownTools",
        "ProviderHTTPError",
        "ProviderTimeout",
        "ProviderDeadlineExceeded",
        "ProviderConnectionError",
        "ProviderProtocolError",
        "ModelBehaviorError",
        "InvalidTranscript",
    ):
        assert name in agent_lab.__all__
        assert issubclass(getattr(agent_lab, name), agent_lab.AgentLabError)
