"""Search over HTTP against a SearXNG-style JSON endpoint.

``GET {url}?q=<query>&format=json`` must answer ``{"results": [{"title", "content",
"url", "score"?}, ...]}``. Every ``httpx`` failure, error status or malformed answer
leaves this module as ``BuiltinToolError`` naming the endpoint (without its query
string or credentials).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from agent_lab.application.builtin_backends import BuiltinToolError, SearchBackendName, SearchHit
from agent_lab.domain.errors import ConfigError

DEFAULT_TIMEOUT_SECONDS = 10.0
_MAX_SNIPPET_CHARS = 500


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
    ) -> None:
        """Search at ``url`` (``http`` or ``https``).

        Args:
            url: The endpoint; ``q`` and ``format=json`` are added to its query string.
            timeout: Seconds for connecting and for each read.
            headers: Extra request headers (e.g. an API key the endpoint wants).
            transport: An ``httpx`` transport to use instead of the network.

        Raises:
            ConfigError: ``url`` is not an absolute http(s) URL.
        """
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigError(f"search URL must be an absolute http(s) URL, got {url!r}")
        self.url = url
        self.timeout = timeout
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
        with (
            self._map_errors(),
            httpx.Client(
                timeout=self.timeout,
                headers=self._headers,
                transport=self._transport,
                follow_redirects=True,
            ) as client,
        ):
            response = client.get(self._endpoint.copy_merge_params({"q": query, "format": "json"}))
            response.raise_for_status()
            document = response.json()
        return parse_results(document, limit=limit, where=self._where)

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
        except ValueError as exc:  # the body is not JSON
            raise BuiltinToolError(f"search backend {where} did not answer JSON") from exc


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
