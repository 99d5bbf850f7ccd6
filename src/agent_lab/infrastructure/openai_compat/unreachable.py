"""An endpoint that could not be reached, said as a plain sentence (``unreachable``).

What the libraries say (aiohttp's ``Cannot connect to host 127.0.0.1:9 ssl:default
[Connect call failed ('127.0.0.1', 9)]``, httpx's ``All connection attempts failed`` or
``[Errno -2] Name or service not known``) names their internals more than the cause.
The message says instead which host and port, and the likely cause: nothing listening
there, a host name that does not resolve, a TLS handshake that failed (a plain-HTTP
server behind ``https://``, an untrusted certificate), no route, a connect timeout. The
libraries' own words stay in ``ProviderUnreachable.audit_detail``, which the turn's
audit keeps (masked, like the message).
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterator

import httpx

from agent_lab.domain.errors import ProviderConnectionError

_NO_ROUTE = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EHOSTDOWN})
_DNS_WORDS = (
    "name or service not known",
    "nodename nor servname",
    "temporary failure in name resolution",
    "no address associated",
    "getaddrinfo failed",
)
_PLAIN_HTTP_WORDS = ("wrong_version_number", "wrong version number", "http_request", "record layer")


class ProviderUnreachable(ProviderConnectionError):
    """``ProviderConnectionError`` with the libraries' own account kept for the audit."""

    def __init__(self, message: str, audit_detail: str) -> None:
        super().__init__(message)
        self.audit_detail = audit_detail


def unreachable(url: str, exc: BaseException, detail: str) -> ProviderUnreachable:
    """The error for ``url`` that could not be reached because of ``exc`` (whose text,
    masked by the caller, is ``detail``)."""
    return ProviderUnreachable(f"cannot reach the provider at {url}: {cause(url, exc)}", detail)


def cause(url: str, exc: BaseException) -> str:
    """The likely cause of the failed connection to ``url``, as one plain clause."""
    host, where = _host_and_port(url)
    chain = list(_chain(exc))
    words = " ".join(str(item) for item in chain).lower()
    if any(isinstance(item, ssl.SSLCertVerificationError) for item in chain) or (
        "certificate_verify_failed" in words
    ):
        return f"the TLS certificate of {where} is not trusted (check the host name and the CA)"
    if any(isinstance(item, ssl.SSLError) for item in chain) or "[ssl" in words:
        if any(marker in words for marker in _PLAIN_HTTP_WORDS):
            return (
                f"the TLS handshake with {where} failed: the server there does not speak "
                "TLS (use http:// instead of https://?)"
            )
        return f"the TLS handshake with {where} failed"
    if any(isinstance(item, socket.gaierror) for item in chain) or any(
        marker in words for marker in _DNS_WORDS
    ):
        return f"the host name {host} could not be resolved (DNS): check its spelling"
    codes = {item.errno for item in chain if isinstance(item, OSError)}
    if errno.ECONNREFUSED in codes or "connect call failed" in words or "refused" in words:
        return f"nothing is listening on {where} (connection refused): is the server running?"
    if codes & _NO_ROUTE:
        return f"there is no route to {where} from this machine (network unreachable)"
    if any(isinstance(item, TimeoutError | httpx.TimeoutException) for item in chain):
        return f"connecting to {where} timed out (a host that is down, or a firewall)"
    return f"the connection to {where} failed"


def _host_and_port(url: str) -> tuple[str, str]:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return url, url
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed.host, f"{parsed.host}:{port}"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups among them."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(item for item in (current.__cause__, current.__context__) if item)
        pending.extend(getattr(current, "exceptions", ()))
        os_error = getattr(current, "os_error", None)  # aiohttp's ClientConnectorError
        if isinstance(os_error, BaseException):
            pending.append(os_error)
