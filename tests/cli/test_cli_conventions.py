"""Command-line conventions: --version, ``python -m agent_lab``, completion, config
discovery and ``agent-lab config``, and plain errors for the mistakes newcomers make."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent_lab import __version__
from agent_lab.interfaces import settings as settings_module
from tests.cli.cli_helpers import Invoke, process_env

SECRET = "sk-config-DO-NOT-SHOW-777"


def test_version_flag_prints_the_version(cli: Invoke) -> None:
    result = cli("--version")

    assert result.exit_code == 0
    assert result.stdout.strip() == f"agent-lab {__version__}"


@pytest.mark.parametrize("args", [("--version",), ("sessions", "list"), ("config",)])
def test_commands_that_call_no_model_never_import_the_openai_sdk(
    home: Path, args: tuple[str, ...]
) -> None:
    """The SDK takes about a second to import; only commands that call a model pay it."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agent_lab", *args],
        capture_output=True,
        text=True,
        env=process_env(home),
        timeout=60,
    )

    assert completed.returncode == 0, completed.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in completed.stderr.splitlines()}
    assert "agent_lab.interfaces.cli" in imported  # the trace covers the CLI's imports
    assert not {name for name in imported if name.split(".")[0] == "openai"}


def test_python_dash_m_agent_lab_runs_the_cli(home: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "agent_lab", "--version"],
        capture_output=True,
        text=True,
        env=process_env(home),
        timeout=60,
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"agent-lab {__version__}"


def test_shell_completion_completes_commands(home: Path) -> None:
    env = process_env(
        home, _AGENT_LAB_COMPLETE="complete_bash", COMP_WORDS="agent-lab ru", COMP_CWORD="1"
    )
    completed = subprocess.run(
        [sys.executable, "-m", "agent_lab"], capture_output=True, text=True, env=env, timeout=60
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["run"]


def test_help_offers_completion_and_names_the_config_files(cli: Invoke) -> None:
    result = cli("--help")

    assert "--install-completion" in result.stdout
    assert "./agent-lab.toml" in result.stdout
    assert "agent-lab/config.toml" in result.stdout
    assert "agent-lab config" in result.stdout


def test_config_discovers_the_project_and_user_files_and_says_where_each_came_from(
    cli: Invoke, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-lab.toml").write_text('model = "from-project"\nmax_event_loops = 5\n')
    user = home / "xdg-config" / "agent-lab"
    user.mkdir(parents=True)
    (user / "config.toml").write_text('model = "from-user"\ntemperature = 0.2\n')
    monkeypatch.chdir(project)

    result = cli("config", "--json", "--base-url", "http://127.0.0.1:9/v1", OPENAI_API_KEY=SECRET)

    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)["settings"]
    assert shown["model"] == {"value": "from-project", "source": str(project / "agent-lab.toml")}
    assert shown["temperature"] == {"value": 0.2, "source": str(user / "config.toml")}
    assert shown["base_url"] == {"value": "http://127.0.0.1:9/v1", "source": "flag"}
    assert shown["api_key"] == {"value": "***", "source": "env OPENAI_API_KEY"}
    assert shown["max_parallel_events"]["source"] == "default"
    assert SECRET not in result.stdout


def test_discovered_settings_are_used_by_run(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agent-lab.toml").write_text('tools = ["no.such.tool"]\n')
    monkeypatch.chdir(tmp_path)

    result = cli("run", "hi")

    assert result.exit_code == 2
    assert "no.such.tool" in result.stderr


def test_config_table_masks_the_key_and_names_sources(cli: Invoke) -> None:
    result = cli("config", "--api-key", SECRET, AGENT_LAB_MODEL="m1")

    assert result.exit_code == 0, result.stderr
    assert SECRET not in result.stdout
    assert "***" in result.stdout
    assert "env AGENT_LAB_MODEL" in result.stdout
    assert "flag" in result.stdout


def test_unknown_config_key_names_the_file_and_the_closest_key(cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text("[agent_lab]\nmax_event_lops = 2\n", encoding="utf-8")

    result = cli("run", "hi", "--config", str(config))

    assert result.exit_code == 2
    assert result.error_lines == [
        f"error: {config}: unknown key 'max_event_lops' (did you mean 'max_event_loops'?)"
    ]


@pytest.mark.parametrize("message", ["", "   \n\t"])
def test_an_empty_message_is_a_plain_usage_error(cli: Invoke, message: str) -> None:
    result = cli("run", message)

    assert result.exit_code == 2
    [line] = result.error_lines
    assert line.startswith("error: the message is empty")
    assert "internal error" not in line and "CommandFailed" not in line


def test_an_empty_message_in_a_real_process(cli_process: Invoke) -> None:
    result = cli_process("run", "  ")

    assert result.exit_code == 2
    assert result.error_lines[0].startswith("error: the message is empty")
    assert "Traceback" not in result.stderr


def test_a_home_that_is_a_file_says_so(cli: Invoke, tmp_path: Path) -> None:
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("x")

    for args in (("run", "hi"), ("sessions", "list")):
        result = cli(*args, AGENT_LAB_HOME=str(not_a_dir))
        assert result.exit_code == 2, args
        assert result.error_lines == [
            f"error: the data directory {not_a_dir} is a file, not a directory "
            "(point --home or AGENT_LAB_HOME at a directory)"
        ]


def test_a_corrupt_database_names_the_path_and_gives_a_hint(cli: Invoke, home: Path) -> None:
    database = home / "agent-lab.sqlite3"
    database.write_bytes(b"this is not a database" * 200)

    result = cli("sessions", "list")

    assert result.exit_code == 2
    [line] = result.error_lines
    assert str(database) in line
    assert "Keep a copy" in line and "--home" in line


def test_ctrl_c_during_start_up_prints_no_traceback(
    cli: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(**_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(settings_module, "resolve_settings", interrupted)

    result = cli("run", "hi")

    assert result.exit_code == 130
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    assert result.error_lines == ["error: interrupted"]


def test_sigint_while_a_real_process_starts_prints_no_traceback(home: Path) -> None:
    """SIGINT at several points of start-up: never a traceback, always 130 (or killed
    before Python set up its handler)."""
    outcomes = []
    for lines_to_wait in (0, 1):
        process = subprocess.Popen(
            [sys.executable, "-u", "-m", "agent_lab", "run", "hi", "--config", "/dev/null"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=process_env(home, AGENT_LAB_SIM_FAST=None),
        )
        assert process.stdout is not None
        for _ in range(lines_to_wait):
            process.stdout.readline()  # the endpoint notice: the lab is up
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        outcomes.append(process.returncode)
        assert "Traceback" not in stderr, stderr
    assert all(code in (130, -signal.SIGINT) for code in outcomes), outcomes


def test_the_completion_script_is_offered_for_bash(home: Path) -> None:
    env = process_env(home, SHELL="/bin/bash")
    completed = subprocess.run(
        [sys.executable, "-m", "agent_lab", "--show-completion", "bash"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )

    assert completed.returncode == 0, completed.stderr
    assert "_AGENT_LAB_COMPLETE" in completed.stdout
    assert os.linesep in completed.stdout


def test_an_endpoint_without_a_model_says_how_to_name_one(cli: Invoke) -> None:
    result = cli("run", "hi", OPENAI_BASE_URL="http://127.0.0.1:9/v1")

    assert result.exit_code == 2
    assert result.error_lines == [
        "error: no model name for http://127.0.0.1:9/v1: pass --model or set AGENT_LAB_MODEL"
        " (GET http://127.0.0.1:9/v1/models lists them)"
    ]


def test_an_endpoint_without_a_model_is_named_without_its_credentials(cli: Invoke) -> None:
    url = "http://bob:hunter2pw@127.0.0.1:9/v1?api-key=KEY123456"
    result = cli("run", "hi", OPENAI_BASE_URL=url)

    assert result.exit_code == 2
    assert result.error_lines == [
        "error: no model name for http://***@127.0.0.1:9/v1?api-key=***: pass --model or set"
        " AGENT_LAB_MODEL (GET http://***@127.0.0.1:9/v1/models?api-key=*** lists them)"
    ]
    output = result.stdout + result.stderr
    assert "hunter2pw" not in output and "KEY123456" not in output
