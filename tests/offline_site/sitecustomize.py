"""The offline guard: no test reaches the network by accident.

``tests/conftest.py`` installs it in the test process. Python subprocesses that a test
starts with the inherited environment get it too: the suite puts this folder on
``PYTHONPATH`` and sets ``AGENT_LAB_OFFLINE=1``, and Python imports ``sitecustomize``
at startup. (A subprocess started with an environment built from scratch, and programs
that are not Python, such as Chromium, are not guarded.)

Loopback addresses (``127.0.0.0/8``, ``::1``, ``localhost``), the unspecified address
and Unix sockets pass. Any other connect, datagram or name lookup raises
``NetworkBlocked`` and is recorded in ``violations``, so a test whose code under test
swallows the error still fails (the suite's fixture checks the record after each test).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from typing import Any

ENV = "AGENT_LAB_OFFLINE"
"""Set to ``1`` to install the guard in a Python process at startup."""

_LOCAL_NAMES = frozenset({"", "localhost", "localhost.localdomain", "ip6-localhost"})

_SHARED = "_agent_lab_offline_violations"

# A subprocess imports this module as ``sitecustomize`` and may import it again under
# its package name (a pytest run in a subprocess): both copies share one record.
violations: list[str] = getattr(socket, _SHARED, [])
"""Every blocked attempt of this process, oldest first."""
setattr(socket, _SHARED, violations)


class NetworkBlocked(ConnectionRefusedError):
    """A test tried to reach a host that is not this machine (catch it as
    ``ConnectionRefusedError``: a second copy of this module has its own class)."""


def is_local_host(host: object) -> bool:
    """Whether ``host`` (a name or address, as sockets take it) is this machine."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].rstrip(".").lower()
    if name in _LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def _block(target: str) -> None:
    message = f"offline test suite: blocked network access to {target} (loopback only)"
    violations.append(message)
    print(message, file=sys.stderr)
    raise NetworkBlocked(message)


def _check(family: int, address: Any) -> None:
    if family not in (socket.AF_INET, socket.AF_INET6):
        return
    host = address[0] if isinstance(address, tuple) and address else address
    if not is_local_host(host):
        _block(repr(host))


def install() -> None:
    """Guard this process; installing twice is harmless."""
    if getattr(socket, "_agent_lab_offline", False):
        return
    socket._agent_lab_offline = True  # type: ignore[attr-defined]
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_sendto = socket.socket.sendto
    real_getaddrinfo = socket.getaddrinfo
    real_gethostbyname = socket.gethostbyname

    def connect(self: socket.SocketType, address: Any) -> None:
        _check(self.family, address)
        real_connect(self, address)

    def connect_ex(self: socket.SocketType, address: Any) -> int:
        _check(self.family, address)
        return real_connect_ex(self, address)

    def sendto(self: socket.SocketType, data: Any, *rest: Any) -> int:
        _check(self.family, rest[-1])
        return real_sendto(self, data, *rest)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_local_host(host):
            _block(f"{host!r} (name lookup)")
        return real_getaddrinfo(host, *args, **kwargs)

    def gethostbyname(host: str) -> str:
        if not is_local_host(host):
            _block(f"{host!r} (name lookup)")
        return real_gethostbyname(host)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = sendto  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo
    socket.gethostbyname = gethostbyname


def export_to_subprocesses() -> None:
    """Make Python subprocesses that inherit ``os.environ`` install the guard too."""
    os.environ[ENV] = "1"
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("PYTHONPATH")
    if here not in (path or "").split(os.pathsep):
        os.environ["PYTHONPATH"] = here if not path else here + os.pathsep + path


if os.environ.get(ENV) == "1":
    install()
