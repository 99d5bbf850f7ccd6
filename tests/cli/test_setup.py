"""The developer setup: the browser tests' gate, the package metadata, the Makefile."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BROWSER_TESTS = "tests/web/test_browser.py"


def run_pytest(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    environment.pop("AGENT_LAB_REQUIRE_BROWSER", None)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


@pytest.mark.slow
def test_without_a_browser_the_browser_tests_skip_with_one_line(tmp_path: Path) -> None:
    result = run_pytest(BROWSER_TESTS, "-q", AGENT_LAB_CHROMIUM=str(tmp_path / "no-chromium"))

    assert result.returncode == 0, result.stdout
    skipped = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1, result.stdout
    assert "browser tests skipped: no Chromium at" in skipped[0]
    assert "apt-get install chromium" in skipped[0]
    assert " passed" not in result.stdout and "failed" not in result.stdout


def test_ci_makes_a_missing_browser_a_failure(tmp_path: Path) -> None:
    """The gate on a small browser-marked file (collecting the real ones takes long)."""
    (tmp_path / "test_page.py").write_text(
        "import pytest\n\n@pytest.mark.browser\ndef test_page():\n    pass\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    browser: a browser test\n")
    result = run_pytest(
        str(tmp_path),
        "-q",
        "-p",
        "browser_gate",
        f"--rootdir={tmp_path}",
        "-c",
        str(tmp_path / "pytest.ini"),
        AGENT_LAB_CHROMIUM=str(tmp_path / "no-chromium"),
        AGENT_LAB_REQUIRE_BROWSER="1",
        PYTHONPATH=str(REPO / "tests"),
    )

    assert result.returncode == 1, result.stdout
    assert "browser tests required (AGENT_LAB_REQUIRE_BROWSER=1) but no Chromium" in result.stdout
    assert "AGENT_LAB_REQUIRE_BROWSER=1" in (REPO / ".ci" / "run").read_text()


def test_ensure_chromium_never_fails_for_a_user_who_cannot_install(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "id").write_text("#!/bin/sh\necho 1000\n")
    (fake_bin / "id").chmod(0o755)
    missing = tmp_path / "no-chromium"
    env = {"PATH": f"{fake_bin}:/usr/bin:/bin", "AGENT_LAB_CHROMIUM": str(missing)}

    result = subprocess.run(
        [str(REPO / "scripts" / "ensure-chromium")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"==> no Chromium at {missing}: the browser tests will be")
    assert "sudo apt-get install chromium" in result.stdout


@pytest.mark.slow
def test_the_license_is_an_spdx_string_and_the_build_prints_no_warning(tmp_path: Path) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"

    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert built.returncode == 0, built.stderr[-2000:]
    output = built.stdout + built.stderr
    assert "SetuptoolsDeprecationWarning" not in output
    assert "project.license" not in output
    [wheel] = tmp_path.glob("agent_lab-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith("METADATA"))
        assert "License-Expression: MIT" in archive.read(metadata).decode()


@pytest.mark.parametrize("target", ["test", "test-local"])
def test_make_shows_progress_and_runs_the_suite_in_parallel(target: str) -> None:
    plan = subprocess.run(
        ["make", "-n", "-B", target, "VENV=/nonexistent-venv"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert plan.returncode == 0, plan.stderr
    assert "==> [3/3] installing agent-lab" in plan.stdout
    assert "--quiet -e" not in plan.stdout  # the long install is not silent
    if target == "test":
        workers = (os.cpu_count() or 1) + 1  # the cores, and one for the waiting
        assert f"pytest -n {workers} --dist loadfile" in plan.stdout


def test_make_test_leaves_the_slow_tests_to_their_own_stage_which_ci_runs() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]
    plan = subprocess.run(
        ["make", "-n", "-B", "test-slow", "VENV=/nonexistent-venv"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert "not slow" in config["ini_options"]["addopts"]
    assert plan.returncode == 0, plan.stderr
    assert f"pytest -n {(os.cpu_count() or 1) + 1} --dist loadfile -m slow" in plan.stdout
    ci_steps = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci_steps.index("make test-slow") == ci_steps.index("make test") + 1
