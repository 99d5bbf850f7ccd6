"""Suite-wide hooks: the browser tests' gate (see ``browser_gate``)."""

from __future__ import annotations

from browser_gate import pytest_runtest_setup

__all__ = ["pytest_runtest_setup"]
