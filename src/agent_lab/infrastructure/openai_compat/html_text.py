"""A short, readable line for an HTML error page (no I/O).

Proxies and gateways (nginx, Cloudflare, a load balancer) answer a failed request with
an HTML page: ``<title>502 Bad Gateway</title>`` and a kilobyte or two of markup and
padding comments. Shown whole, it buries the one thing the user needs. ``html_summary``
gives the page's title and first text, with whitespace folded and cut short.
"""

from __future__ import annotations

from html.parser import HTMLParser

_LIMIT = 200
_SKIPPED = frozenset({"script", "style", "head", "noscript", "template"})


def looks_like_html(text: str, content_type: str = "") -> bool:
    """Whether an error body is an HTML page (by its content type or its first tag)."""
    if "html" in content_type.lower():
        return True
    start = text.lstrip()[:15].lower()
    return start.startswith(("<!doctype html", "<html", "<head", "<body"))


def html_summary(text: str, limit: int = _LIMIT) -> str:
    """The page's ``<title>`` and the text of its body (a heading that repeats the
    title left out), on one line and cut to ``limit`` characters with an ellipsis:
    ``502 Bad Gateway: nginx/1.25.3``; ``""`` when the page has no text."""
    reader = _PageText()
    reader.feed(text)
    reader.close()
    title = " ".join(" ".join(reader.title).split())
    body = " ".join(" ".join(reader.text).split())
    if title and body.startswith(title):  # the heading repeats the title
        body = body[len(title) :].lstrip()
    found = f"{title}: {body}" if title and body else title or body
    return found if len(found) <= limit else found[: limit - 1].rstrip() + "…"


class _PageText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.text: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED or tag == "title":
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            while self._open and self._open.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if "title" in self._open:
            self.title.append(data)
        elif not self._open and data.strip():
            self.text.append(data)
