"""Search over HTTP against a SearXNG-style JSON endpoint.

``GET {url}?q=<query>&format=json`` must answer ``{"results": [{"title", "content",
"url", "score"?}, ...]}``. Every ``httpx`` failure, error status or malformed answer
leaves this module as ``BuiltinToolError`` naming the endpoint (without its query
string or credentials).

What the endpoint may make the tool do is bounded:

* redirects are followed only within the endpoint's own origin (same scheme, host and
  port), at most ``MAX_REDIRECTS`` of them; a redirect anywhere else is refused;
* link-local and cloud metadata addresses (``169.254.0.0/16``, ``fe80::/10``,
  ``metadata.google.internal``, ...) are refused, as a configured host, as a redirect
  target, and as the address a host name resolved to;
* the answer may be at most ``max_response_bytes`` long and must arrive completely
  within ``timeout`` seconds of the request (a slow drip does not extend it).
"""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from agent_lab.application.builtin_backends import BuiltinToolError, SearchBackendName, SearchHit
from agent_lab.domain.errors import ConfigError

DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_RESPONSE_BYTES = 1_000_000
MAX_REDIRECTS = 3
_MAX_SNIPPET_CHARS = 500
_METADATA_ADDRESSES = frozenset({"fd00:ec2::254", "100.100.100.200"})
_METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)


class HttpSearchBackend:
    """Queries a SearXNG-compatible search endpoint.

    Thread-safe: every search uses its own short-lived ``httpx.Client``.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        """Search at ``url`` (``http`` or ``https``).

        Args:
            url: The endpoint; ``q`` and ``format=json`` are added to its query string.
            timeout: Seconds for the whole search: connecting, redirects and the body.
            headers: Extra request headers (e.g. an API key the endpoint wants).
            transport: An ``httpx`` transport to use instead of the network.
            max_response_bytes: The longest answer body accepted.

        Raises:
            ConfigError: ``url`` is not an absolute http(s) URL, or names a link-local
                or metadata host.
        """
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigError(f"search URL must be an absolute http(s) URL, got {url!r}")
        if forbidden_host(parsed.host):
            raise ConfigError(f"search URL must not name a link-local or metadata host: {url!r}")
        self.url = url
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self._endpoint = parsed
        self._headers = dict(headers or {})
        self._transport = transport
        self._where = str(parsed.copy_with(query=None, fragment=None, username=None, password=None))

    @property
    def name(self) -> SearchBackendName:
        """Always ``"http"``."""
        return "http"

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """The endpoint's first ``limit`` results for ``query``.

        Raises:
            BuiltinToolError: the endpoint timed out, was unreachable, answered an
                error status, or did not answer the expected JSON.
        """
        deadline = time.monotonic() + self.timeout
        with (
            self._map_errors(),
            httpx.Client(
                timeout=self.timeout,
                headers=self._headers,
                transport=self._transport,
                follow_redirects=False,
            ) as client,
        ):
            url = self._endpoint.copy_merge_params({"q": query, "format": "json"})
            body = self._fetch(client, url, deadline)
        try:
            document = json.loads(body)
        except ValueError as exc:  # not JSON (or not UTF-8)
            raise BuiltinToolError(f"search backend {self._where} did not answer JSON") from exc
        return parse_results(document, limit=limit, where=self._where)

    def _fetch(self, client: httpx.Client, url: httpx.URL, deadline: float) -> bytes:
        for _ in range(MAX_REDIRECTS + 1):
            with client.stream("GET", url) as response:
                self._check_peer(response)
                if not response.is_redirect:
                    response.raise_for_status()
                    return self._read(response, deadline)
                url = self._redirect_target(response)
        raise BuiltinToolError(
            f"search backend {self._where} redirected more than {MAX_REDIRECTS} times"
        )

    def _redirect_target(self, response: httpx.Response) -> httpx.URL:
        target = response.url.join(response.headers.get("location", ""))
        endpoint = self._endpoint
        same_origin = (target.scheme, target.host, target.port) == (
            endpoint.scheme,
            endpoint.host,
            endpoint.port,
        )
        if not same_origin or forbidden_host(target.host):
            raise BuiltinToolError(
                f"search backend {self._where} redirected to another host; not followed"
            )
        return target

    def _check_peer(self, response: httpx.Response) -> None:
        stream = response.extensions.get("network_stream")
        address = stream.get_extra_info("server_addr") if stream is not None else None
        if isinstance(address, tuple) and address and forbidden_host(str(address[0])):
            raise BuiltinToolError(
                f"search backend {self._where} resolved to a link-local or metadata address"
            )

    def _read(self, response: httpx.Response, deadline: float) -> bytes:
        cap = self.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise BuiltinToolError(f"search backend {self._where} answered more than {cap} bytes")
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > cap:
                raise BuiltinToolError(
                    f"search backend {self._where} answered more than {cap} bytes"
                )
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("the answer took too long", request=response.request)
            chunks.append(chunk)
        return b"".join(chunks)

    @contextmanager
    def _map_errors(self) -> Iterator[None]:
        where = self._where
        try:
            yield
        except httpx.TimeoutException as exc:
            message = f"search backend {where} did not answer within {self.timeout:g}s"
            raise BuiltinToolError(message) from exc
        except httpx.HTTPStatusError as exc:
            status = exc.response.status_code
            raise BuiltinToolError(f"search backend {where} answered HTTP {status}") from exc
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise BuiltinToolError(f"could not reach search backend {where}: {reason}") from exc


def forbidden_host(host: str) -> bool:
    """Whether ``host`` is a link-local address or a cloud metadata name."""
    name = host.strip("[]").rstrip(".").lower()
    if name in _METADATA_HOSTS:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_link_local or str(address) in _METADATA_ADDRESSES


def parse_results(document: Any, *, limit: int, where: str = "") -> list[SearchHit]:
    """Hits from a SearXNG-style answer, in the endpoint's order.

    Results without a title and a URL are skipped; a missing ``score`` becomes
    ``1 / rank``.

    Raises:
        BuiltinToolError: ``document`` has no ``results`` list.
    """
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list):
        raise BuiltinToolError(f"search backend {where} answered JSON without a results list")
    hits: list[SearchHit] = []
    for item in results:
        hit = _hit(item, rank=len(hits) + 1)
        if hit is not None:
            hits.append(hit)
        if len(hits) >= limit:
            break
    return hits


def _hit(item: Any, *, rank: int) -> SearchHit | None:
    if not isinstance(item, dict):
        return None
    url = str(item.get("url") or "").strip()
    title = str(item.get("title") or "").strip()
    if not url and not title:
        return None
    score = item.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        score = 1.0 / rank
    snippet = " ".join(str(item.get("content") or "").split())[:_MAX_SNIPPET_CHARS]
    return SearchHit(title=title or url, snippet=snippet, source=url or title, score=float(score))
