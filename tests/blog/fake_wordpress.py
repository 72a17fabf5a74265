"""A local WordPress that answers `GET /wp-json/wp/v2/posts` as WP_REST_Posts_Controller does.

Shapes follow WordPress core: posts with `title`/`excerpt`/`content` as
`{"rendered": ...}`, `X-WP-Total` / `X-WP-TotalPages`, `per_page` limited to
1–100 (`400 rest_invalid_param`), a page past the end `400
rest_post_invalid_page_number` unless there are no posts at all (then `200 []`),
`?slug=` filtering, `_fields` keeping top-level fields (`_embedded` only when
`_links` and `_embedded` are asked for) and `_embed` (all, or a comma list of
`author`, `wp:featuredmedia`, `wp:term`).

Test knobs: `posts` (replace to "publish"), `status` (answer every request
with it, e.g. 503), `delay` (seconds before answering), `credentials`
(required Basic auth), and `calls` (requests counted, thread-safe).
"""

import base64
import contextlib
import json
import math
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

SITE = "https://blog.example.com"
ORDERBY = {"author", "date", "id", "include", "modified", "parent", "relevance", "slug", "include_slugs", "title"}


def make_post(number: int, *, title=None, content=None, category=3, tag=7) -> dict:
    day = (datetime(2026, 11, 1) + timedelta(hours=number)).isoformat()  # a higher number is newer
    return {
        "id": number,
        "date": day,
        "date_gmt": day,
        "guid": {"rendered": f"{SITE}/?p={number}"},
        "modified": day,
        "modified_gmt": day,
        "slug": f"post-{number}",
        "status": "publish",
        "type": "post",
        "link": f"{SITE}/post-{number}/",
        "title": {"rendered": title or f"Post number {number}"},
        "content": {"rendered": content or f"<p>Body of post {number}.</p>\n", "protected": False},
        "excerpt": {"rendered": f"<p>Summary of post {number}</p>\n", "protected": False},
        "author": 1,
        "featured_media": 1000 + number,
        "comment_status": "open",
        "ping_status": "open",
        "sticky": False,
        "template": "",
        "format": "standard",
        "meta": {"footnotes": ""},
        "categories": [category],
        "tags": [tag],
        "class_list": [f"post-{number}", "post", "type-post", "status-publish"],
        "_links": {
            "self": [{"href": f"{SITE}/wp-json/wp/v2/posts/{number}"}],
            "author": [{"embeddable": True, "href": f"{SITE}/wp-json/wp/v2/users/1"}],
            "wp:featuredmedia": [{"embeddable": True, "href": f"{SITE}/wp-json/wp/v2/media/{1000 + number}"}],
        },
    }


TERMS = {
    3: {"id": 3, "name": "Engineering", "slug": "engineering", "taxonomy": "category"},
    4: {"id": 4, "name": "News", "slug": "news", "taxonomy": "category"},
    7: {"id": 7, "name": "kafka", "slug": "kafka", "taxonomy": "post_tag"},
}


def _embedded(post: dict, wanted: set[str] | None) -> dict:
    embedded = {
        "author": [{"id": 1, "name": "Ada Writer", "url": "", "description": "", "link": f"{SITE}/author/ada/",
                    "slug": "ada", "avatar_urls": {"96": "https://secure.gravatar.com/avatar/0?s=96"}}],
        "wp:featuredmedia": [{"id": post["featured_media"], "type": "attachment", "media_type": "image",
                              "mime_type": "image/jpeg", "alt_text": "",
                              "source_url": f"{SITE}/wp-content/uploads/2026/11/cover-{post['id']}.jpg"}],
        "wp:term": [
            [{**TERMS[i], "link": f"{SITE}/category/{TERMS[i]['slug']}/"} for i in post["categories"]],
            [{**TERMS[i], "link": f"{SITE}/tag/{TERMS[i]['slug']}/"} for i in post["tags"]],
        ],
    }  # fmt: skip
    return {name: value for name, value in embedded.items() if wanted is None or name in wanted}


class FakeWordPress:
    def __init__(self, posts=None):
        self.posts = list(posts if posts is not None else [make_post(n) for n in range(1, 26)])
        self.status: int | None = None
        self.delay = 0.0
        self.credentials: tuple[str, str] | None = None
        self.calls = 0
        self.requests: list[dict] = []  # query of every request, in order
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                fake._answer(self)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.api_url = f"http://127.0.0.1:{self.server.server_port}/wp-json"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    # --- one request -------------------------------------------------------------------------

    def _answer(self, handler):
        url = urlsplit(handler.path)
        query = {name: values[-1] for name, values in parse_qs(url.query, keep_blank_values=True).items()}
        with self._lock:
            self.calls += 1
            self.requests.append(query)
        if self.delay:
            time.sleep(self.delay)
        if url.path.rstrip("/") != "/wp-json/wp/v2/posts":
            return self._send(handler, 404, {"code": "rest_no_route", "message": "No route was found matching "
                                                                                 "the URL and request method.",
                                             "data": {"status": 404}})  # fmt: skip
        if self.status:
            return self._send(handler, self.status, {"code": "internal_server_error", "message": "down",
                                                     "data": {"status": self.status}})  # fmt: skip
        if self.credentials and not self._authorized(handler):
            return self._send(handler, 401, {"code": "incorrect_password", "message": "The provided password is "
                                             "an invalid application password.", "data": {"status": 401}})  # fmt: skip
        status, body, headers = self._posts(query)
        self._send(handler, status, body, headers)

    def _authorized(self, handler) -> bool:
        expected = base64.b64encode(":".join(self.credentials).encode()).decode()
        return handler.headers.get("Authorization", "") == f"Basic {expected}"

    def _posts(self, query):
        invalid = {}
        try:
            page = int(query.get("page", "1"))
            if page < 1:
                invalid["page"] = "page must be greater than or equal to 1"
        except ValueError:
            invalid["page"], page = "page is not of type integer.", 1
        try:
            per_page = int(query.get("per_page", "10"))
            if not 1 <= per_page <= 100:
                invalid["per_page"] = "per_page must be between 1 (inclusive) and 100 (inclusive)"
        except ValueError:
            invalid["per_page"], per_page = "per_page is not of type integer.", 10
        orderby = query.get("orderby", "date")
        if orderby not in ORDERBY:
            invalid["orderby"] = f"orderby is not one of {', '.join(sorted(ORDERBY))}."
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            invalid["order"] = "order is not one of asc and desc."
        if invalid:
            return 400, {"code": "rest_invalid_param", "message": f"Invalid parameter(s): {', '.join(invalid)}",
                         "data": {"status": 400, "params": invalid}}, {}  # fmt: skip
        if orderby == "relevance" and not query.get("search"):
            return 400, {"code": "rest_no_search_term_defined", "message": "You need to define a search term to "
                         "order by relevance.", "data": {"status": 400}}, {}  # fmt: skip

        posts = list(self.posts)
        if "slug" in query:
            slugs = set(query["slug"].split(","))
            posts = [post for post in posts if post["slug"] in slugs]
        if search := query.get("search"):
            needle = search.lower()
            posts = [p for p in posts if needle in p["title"]["rendered"].lower() or
                     needle in p["content"]["rendered"].lower()]  # fmt: skip
        for name in ("categories", "tags"):
            if query.get(name):
                wanted = {int(term) for term in query[name].split(",") if term.strip().isdigit()}
                posts = [post for post in posts if wanted & set(post[name])]
        sort_key = {"title": lambda p: p["title"]["rendered"], "id": lambda p: p["id"],
                    "slug": lambda p: p["slug"], "modified": lambda p: (p["modified"], p["id"])}.get(
            orderby, lambda p: (p["date"], p["id"]))  # fmt: skip
        posts.sort(key=sort_key, reverse=order == "desc")

        total = len(posts)
        total_pages = math.ceil(total / per_page)
        if page > total_pages and total > 0:
            return 400, {"code": "rest_post_invalid_page_number", "message": "The page number requested is larger "
                         "than the number of pages available.", "data": {"status": 400}}, {}  # fmt: skip
        window = posts[(page - 1) * per_page : page * per_page]
        fields = set(query["_fields"].split(",")) if query.get("_fields") else None
        embed = query.get("_embed")
        wanted_embeds = None if embed in ("", "1", "true") else set((embed or "").split(","))
        body = []
        for post in window:
            shown = dict(post)
            if embed is not None and (fields is None or "_links" in fields):
                shown["_embedded"] = _embedded(post, wanted_embeds)
            if fields is not None:
                shown = {name: value for name, value in shown.items() if name in fields}
            body.append(shown)
        return 200, body, {"X-WP-Total": str(total), "X-WP-TotalPages": str(total_pages)}

    def _send(self, handler, status, body, headers=None):
        payload = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=UTF-8")
        handler.send_header("Content-Length", str(len(payload)))
        handler.send_header("Allow", "GET")
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            handler.wfile.write(payload)
