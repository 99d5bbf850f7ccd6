"""`LocalModelServer`: llama.cpp's OpenAI-compatible server on a model file, as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Final, Self

import httpx

from agent_lab.domain.errors import ConfigError, UsageError
from agent_lab.infrastructure.local_llm.bundle import (
    LOCAL_INSTALL_HINT,
    find_bundled_model,
    is_local_extra_installed,
)

# The server reads these from the environment and lets HOST and PORT win over its
# command line, so an inherited value would move it off loopback or off our port.
_OVERRIDING_ENV: Final = frozenset({"HOST", "PORT", "CONFIG_FILE", "API_KEY"})

_POLL_INTERVAL_S: Final = 0.2
_PORT_ATTEMPTS: Final = 3
_STOP_GRACE_S: Final = 5.0
_LOG_TAIL_CHARS: Final = 2000


def _free_port(host: str, port: int = 0) -> int:
    # With an explicit port this only checks that nothing listens there yet: the
    # readiness poll would otherwise take another server's answer for ours.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        bound: int = probe.getsockname()[1]
        return bound


def _server_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.upper() not in _OVERRIDING_ENV}


def _read_tail(path: Path, limit: int = _LOG_TAIL_CHARS) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-limit:]


class LocalModelServer:
    """llama.cpp's OpenAI-compatible server on a bundled model, as a subprocess.

    Use it as a context manager (``with`` or ``async with``), or call `start` and
    `close` yourself. The server always listens on a loopback address and runs with
    ``interrupt_requests`` off, so concurrent requests queue instead of cutting a
    running stream short.

    Attributes:
        model_path: The ``.gguf`` file being served.
        host: The listen address.
        chat_format: llama.cpp chat handler, or None for the model file's own
            template. ``chatml-function-calling`` shows ``tools`` to the model but
            HTML-escapes message text; both handle a forced ``tool_choice``.
        n_ctx: Context window in tokens.
        n_threads: Generation threads; None keeps llama.cpp's default (half the
            CPUs, at least one), which holds up best on a busy small machine.
        startup_timeout: Seconds to wait for ``/v1/models`` to answer.
    """

    def __init__(
        self,
        model_path: Path | str | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chat_format: str | None = "chatml-function-calling",
        n_ctx: int = 2048,
        n_threads: int | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        """Configure the server; nothing starts until `start` or ``with``.

        Args:
            model_path: Model file; None means `find_bundled_model`.
            host: Listen address; must be a loopback address.
            port: Listen port; 0 picks a free one.
            chat_format: llama.cpp ``--chat_format``; None uses the chat template
                stored in the model file (see ``docs/local-model.md`` for the
                trade-off).
            n_ctx: llama.cpp ``--n_ctx``.
            n_threads: llama.cpp ``--n_threads``; None keeps llama.cpp's default.
            startup_timeout: Seconds to wait for the server to answer.

        Raises:
            ConfigError: ``host`` is not a loopback address, or the numbers are out
                of range.
        """
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ConfigError(f"the local model server binds loopback only, not {host!r}")
        if (
            port < 0
            or n_ctx < 1
            or startup_timeout <= 0
            or (n_threads is not None and n_threads < 1)
        ):
            raise ConfigError("port, n_ctx, n_threads and startup_timeout must be positive")
        self.model_path = Path(model_path) if model_path is not None else None
        self.host = host
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.startup_timeout = startup_timeout
        self._requested_port = port
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_dir: Path | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def port(self) -> int:
        """The port the server listens on (known once started)."""
        if self._port is None:
            raise UsageError("the local model server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ending in ``/v1``."""
        return f"http://{self._url_host}:{self.port}/v1"

    @property
    def model(self) -> str:
        """The model name to send: the alias the server registers for the file."""
        return self._resolved_model_path().stem

    @property
    def log_path(self) -> Path | None:
        """The file that receives the server's stdout and stderr, once started."""
        return self._log_dir / "server.log" if self._log_dir is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def _url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    def _resolved_model_path(self) -> Path:
        if self.model_path is None:
            self.model_path = find_bundled_model()
        return self.model_path

    def start(self) -> Self:
        """Start the server and wait until it answers ``GET /v1/models``.

        Returns:
            This server, so ``server = LocalModelServer().start()`` reads well.

        Raises:
            UsageError: It is already started.
            ConfigError: The extra is missing, the model file does not exist, the
                process died during startup (the message has the log tail), or it
                did not answer within ``startup_timeout`` (then it is stopped).
        """
        if self._process is not None:
            raise UsageError("the local model server is already started")
        model_path = self._check_installation()
        attempt = 1
        while True:
            try:
                self._launch(model_path)
                self._wait_until_ready()
                return self
            except BaseException as exc:
                retry = isinstance(exc, ConfigError) and self._lost_port_race(attempt)
                self._stop_process()
                if not retry:
                    raise
                attempt += 1

    def _launch(self, model_path: Path) -> None:
        self._port = _free_port(self.host, self._requested_port)
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="agent-lab-llamacpp-"))
        self._log_file = (self._log_dir / "server.log").open("ab")
        self._process = subprocess.Popen(
            self._command(model_path),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=_server_env(),
        )

    def _lost_port_race(self, attempt: int) -> bool:
        # A port picked by `_free_port` can be taken before the server binds it.
        if self._requested_port or attempt >= _PORT_ATTEMPTS:
            return False
        exited = self._process is not None and self._process.poll() is not None
        log_tail = _read_tail(self.log_path) if self.log_path is not None else ""
        return exited and "address already in use" in log_tail.lower()

    def _check_installation(self) -> Path:
        if not is_local_extra_installed():
            raise ConfigError(f"llama.cpp's server is not installed; {LOCAL_INSTALL_HINT}")
        model_path = self._resolved_model_path()
        if not model_path.is_file():
            raise ConfigError(f"model file not found: {model_path}")
        return model_path

    def _command(self, model_path: Path) -> list[str]:
        options = {
            "model": str(model_path),
            "model_alias": self.model,
            "host": self.host,
            "port": str(self.port),
            "n_ctx": str(self.n_ctx),
            "interrupt_requests": "False",
        }
        if self.n_threads is not None:
            options["n_threads"] = str(self.n_threads)
        if self.chat_format is not None:
            options["chat_format"] = self.chat_format
        flags = [part for key, value in options.items() for part in (f"--{key}", value)]
        return [sys.executable, "-m", "llama_cpp.server", *flags]

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while time.monotonic() < deadline:
                if self._process is not None and self._process.poll() is not None:
                    raise ConfigError(self._failure("exited during startup"))
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"{self.base_url}/models").status_code == 200:
                        return
                time.sleep(_POLL_INTERVAL_S)
        raise ConfigError(self._failure(f"did not answer within {self.startup_timeout:g} s"))

    def _failure(self, what: str) -> str:
        code = self._process.poll() if self._process is not None else None
        status = f" with code {code}" if code is not None else ""
        tail = _read_tail(self.log_path) if self.log_path is not None else ""
        return (
            f"llama.cpp server {what}{status} (log: {self.log_path}); "
            f"last output:\n{tail.strip() or '(empty)'}"
        )

    def close(self) -> None:
        """Stop the server: terminate, then kill after a grace period.

        The log directory is removed when the process stopped cleanly, and kept
        otherwise so `log_path` stays readable. Calling it twice is harmless.
        """
        if self._process is None:
            return
        clean = self._stop_process()
        if clean and self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None

    def _stop_process(self) -> bool:
        process, self._process = self._process, None
        clean = True
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                clean = False
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return clean

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        starting = asyncio.ensure_future(asyncio.to_thread(self.start))
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            # The start thread cannot be interrupted: let it finish, then stop
            # whatever it started so no server outlives the cancelled task.
            await asyncio.wait([starting])
            await asyncio.to_thread(self.close)
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.close)

    def __repr__(self) -> str:
        state = f"{self.base_url}" if self.running else "stopped"
        return f"LocalModelServer({self.model_path}, {state})"
