"""A docs page as text, fetched only from the documentation origins we configure.

The URL comes from an agent, so it is untrusted: it must name exactly one of
MCP_DOCS_ORIGINS (scheme, host and port), carry no credentials, and a redirect
is followed only while it stays on that origin (at most MAX_REDIRECTS). Any
other URL is refused before a connection is made, so the tool cannot be aimed
at internal addresses, cloud metadata services or other sites. The answer is
read up to MAX_PAGE_BYTES and must be HTML or plain text.

HTML becomes text with the standard library's HTMLParser: the text of the
page without scripts, styles and templates, block elements on their own
lines. That is all an agent needs from a docs page, and no dependency does it
with less.
"""

from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from integrations.http import HttpClient
from jobs import PermanentError

MAX_PAGE_BYTES = 2 * 1024 * 1024
MAX_TEXT_CHARS = 50_000
MAX_REDIRECTS = 3
_TEXT_TYPES = ("text/html", "text/plain", "application/xhtml+xml")


class PageRefused(Exception):
    """The URL is not on an allowed docs origin, or the page is not one we read."""


@dataclass(frozen=True)
class DocsPage:
    url: str
    title: str
    text: str
    truncated: bool


def origin_of(url: str) -> str:
    """`https://docs.example.com` for any URL on it ("" for a URL that is not http(s) or has credentials)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return ""
    default_port = {"http": 80, "https": 443}[parts.scheme]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default_port else "")


class DocsSiteClient(HttpClient):
    service = "docs-site"

    def __init__(self, origins: list[str], **kwargs):
        self.origins = {origin_of(origin) for origin in origins} - {""}
        super().__init__(next(iter(sorted(self.origins)), "http://invalid"), **kwargs)

    def page(self, url: str) -> DocsPage:
        current = url.strip()
        for _ in range(MAX_REDIRECTS + 1):
            if origin_of(current) not in self.origins:
                raise PageRefused("only pages of the documentation site can be read")
            response = self.get(current, allow_redirects=False, stream=True)
            with response:
                if response.is_redirect:
                    current = urljoin(current, response.headers.get("Location", ""))
                    continue
                content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
                if content_type not in _TEXT_TYPES:
                    raise PageRefused(f"not a text page ({content_type or 'no content type'})")
                body = _read_capped(response)
            text = body.decode(response.encoding or "utf-8", errors="replace")
            title, text = _html_text(text) if content_type != "text/plain" else ("", text)
            return DocsPage(url=current, title=title, text=text[:MAX_TEXT_CHARS], truncated=len(text) > MAX_TEXT_CHARS)
        raise PermanentError("docs-site: too many redirects")


def _read_capped(response) -> bytes:
    chunks, size = [], 0
    for chunk in response.iter_content(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_PAGE_BYTES:
            break
    return b"".join(chunks)[:MAX_PAGE_BYTES]


class _TextExtractor(HTMLParser):
    SKIPPED = frozenset({"script", "style", "noscript", "template", "svg"})
    BLOCKS = frozenset({"p", "div", "section", "article", "li", "tr", "pre", "br", "h1", "h2", "h3", "h4", "h5", "h6"})

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skipping = 0
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIPPED:
            self._skipping += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIPPED:
            self._skipping = max(self._skipping - 1, 0)
        elif tag == "title":
            self._in_title = False
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if self._in_title:
            self.title.append(data)
        elif not self._skipping:
            self.parts.append(data)


def _html_text(html: str) -> tuple[str, str]:
    extractor = _TextExtractor()
    extractor.feed(html)
    extractor.close()
    lines = (" ".join(line.split()) for line in "".join(extractor.parts).splitlines())
    return " ".join("".join(extractor.title).split()), "\n".join(line for line in lines if line)
