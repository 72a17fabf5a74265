"""A local WordPress that answers `GET /wp-json/wp/v2/posts` as WP_REST_Posts_Controller does.

Shapes follow WordPress core: posts with `title`/`excerpt`/`content` as `{"rendered": ...}`, `X-WP-Total` /
`X-WP-TotalPages`, `per_page` limited to 1–100 (`400 rest_invalid_param`), a page past the end `400
rest_post_invalid_page_number` unless there are no posts at all (then `200 []`), `?slug=` filtering,
`_fields` keeping top-level fields (`_embedded` only when `_links` and `_embedded` are asked for) and
`_embed` (all, or a comma list of `author`, `wp:featuredmedia`, `wp:term`).

Test knobs: `posts` (replace to "publish"), `status` (answer every request with it, e.g. 503), `delay`
(seconds before answering), `credentials` (required Basic auth), and `calls` (requests counted).

With `demo`, as `make run` wants it, the site has a dozen posts in four categories, each with a cover
image this stand-in serves itself (an SVG under /wp-content/uploads/, named by the post as Jetpack's
`jetpack_featured_media_url` does).

    python -m standins.wordpress --port 8774
"""

import argparse
import asyncio
import base64
import html
import math
import mimetypes
import textwrap
from collections.abc import Sequence
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from aiohttp import web

from standins.base import Received
from standins.serving import AiohttpStandIn

SITE = "https://blog.example.com"
ORDERBY = {"author", "date", "id", "include", "modified", "parent", "relevance", "slug", "include_slugs", "title"}


def make_post(
    number: int, *, title=None, content=None, category=3, tag=7, site=SITE, excerpt=None, date=None, slug=None
) -> dict:
    day = (date or datetime(2026, 11, 1) + timedelta(hours=number)).isoformat()  # a higher number is newer
    slug = slug or f"post-{number}"
    return {
        "id": number,
        "date": day,
        "date_gmt": day,
        "guid": {"rendered": f"{site}/?p={number}"},
        "modified": day,
        "modified_gmt": day,
        "slug": slug,
        "status": "publish",
        "type": "post",
        "link": f"{site}/{slug}/",
        "title": {"rendered": title or f"Post number {number}"},
        "content": {"rendered": content or f"<p>Body of post {number}.</p>\n", "protected": False},
        "excerpt": {"rendered": f"<p>{excerpt or f'Summary of post {number}'}</p>\n", "protected": False},
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
            "self": [{"href": f"{site}/wp-json/wp/v2/posts/{number}"}],
            "author": [{"embeddable": True, "href": f"{site}/wp-json/wp/v2/users/1"}],
            "wp:featuredmedia": [{"embeddable": True, "href": f"{site}/wp-json/wp/v2/media/{1000 + number}"}],
        },
    }


TERMS = {
    3: {"id": 3, "name": "Engineering", "slug": "engineering", "taxonomy": "category"},
    4: {"id": 4, "name": "News", "slug": "news", "taxonomy": "category"},
    5: {"id": 5, "name": "Product", "slug": "product", "taxonomy": "category"},
    6: {"id": 6, "name": "Case studies", "slug": "case-studies", "taxonomy": "category"},
    7: {"id": 7, "name": "kafka", "slug": "kafka", "taxonomy": "post_tag"},
    8: {"id": 8, "name": "prototyping", "slug": "prototyping", "taxonomy": "post_tag"},
    9: {"id": 9, "name": "mobile", "slug": "mobile", "taxonomy": "post_tag"},
    10: {"id": 10, "name": "automation", "slug": "automation", "taxonomy": "post_tag"},
}
COLOURS = {3: ("#1e3a8a", "#3b82f6"), 4: ("#7c2d12", "#f97316"), 5: ("#14532d", "#22c55e"), 6: ("#581c87", "#a855f7")}

# (title, excerpt, category, tag, paragraphs): the demo blog.
DEMO_POSTS = [
    ("How we ship a working prototype in two weeks", "Day one is a diagnostic, day ten is a demo your users can click.",
     5, 8, ["Most projects stall before the first line of code: nobody has seen the thing yet. We start with a "
            "two-hour diagnostic, agree on the one flow that matters, and build only that.",
            "By the end of the first week there is a clickable version; by the end of the second, a working one "
            "on real data. Then we decide together what the real product needs."]),
    ("Web app or mobile app: what to build first", "A short guide to picking the first platform for a new product.",
     5, 9, ["If your users sit at a desk, start on the web: one release reaches everyone and ships the same day.",
            "If they are on the move, or need the camera, notifications or offline use, a mobile app pays for "
            "itself. React Native lets one team serve both stores."]),
    ("Automating invoice approvals for a logistics firm", "From 40 emails per invoice to one click in Slack.",
     6, 10, ["Each invoice went through four people and a shared spreadsheet. We mapped the process, kept the "
             "two checks that mattered and automated the rest.",
             "Approval time dropped from nine days to one, and the finance team stopped chasing signatures."]),
    ("React Native or native? Lessons from twelve launches", "What we learned shipping apps to both stores.",
     3, 9, ["React Native was the right call for ten of the twelve: forms, lists, payments and maps.",
            "The other two needed heavy audio processing and custom camera pipelines, where Swift and Kotlin "
            "still win."]),
    ("Running a dedicated team across three time zones", "Overlap hours, written decisions and a weekly demo.",
     3, 8, ["A dedicated team works in your tools and your rituals. What makes it work across time zones is "
            "boring: two hours of overlap, decisions written down, and a demo every Friday."]),
    ("Pricing a software project without guessing", "Ranges, assumptions and the questions that narrow them.",
     5, 8, ["A two-week prototype has a fixed price. A first release is a range, and the range narrows as the "
            "unknowns are answered.", "We publish our assumptions with every estimate, so you can see which "
            "answer moves the number."]),
    ("From spreadsheet to SaaS: rebuilding a quoting tool", "A 14-tab spreadsheet became a web app in ten weeks.",
     6, 10, ["The quoting spreadsheet had grown for eight years. We kept its formulas, turned its tabs into "
             "screens and added the one thing it could never do: let customers quote themselves."]),
    ("Five questions to ask before hiring a development agency", "Who will actually write the code?",
     4, 8, ["Who writes the code? Who owns it? How often will you see working software? What happens when "
            "someone leaves? And what did their last client say?"]),
    ("Accessibility is a feature: our release checklist", "Keyboard, contrast, screen readers, every release.",
     3, 9, ["Every release goes through the same twelve checks, from keyboard navigation to screen reader "
            "labels. It takes an hour and it has never been the thing that delayed a launch."]),
    ("We opened an office in Lyon", "Twelve engineers and designers, a short walk from Part-Dieu station.",
     4, 8, ["Our second office opens this month. Come and say hello: the coffee machine works."]),
    ("Boring technology choices that last", "PostgreSQL, Redis and a monolith, ten years on.",
     3, 7, ["Most of our products run on PostgreSQL, Redis and one well-organised application. It is not "
            "exciting, and that is the point: the team spends its time on the product."]),
    ("Streaming orders in real time for a retail chain", "Kafka topics between 300 stores and one warehouse.",
     6, 7, ["Every till now publishes its sales to a topic; the warehouse plans deliveries from the stream "
            "instead of a nightly file. Stock-outs fell by a third in the first quarter."]),
]  # fmt: skip


def demo_posts(site: str) -> list[dict]:
    """The demo blog's posts on `site`, newest first, each with its cover on `site`."""
    posts = []
    for number, (title, excerpt, category, tag, paragraphs) in enumerate(reversed(DEMO_POSTS), start=1):
        date = datetime(2026, 11, 28) - timedelta(days=(len(DEMO_POSTS) - number) * 6)
        slug = "-".join("".join(c for c in word if c.isalnum()) for word in title.lower().split())
        content = "".join(f"<p>{html.escape(paragraph)}</p>\n" for paragraph in paragraphs)
        post = make_post(number, title=html.escape(title), content=content, category=category, tag=tag, site=site,
                         excerpt=html.escape(excerpt), date=date, slug=slug)  # fmt: skip
        post["jetpack_featured_media_url"] = f"{site}/wp-content/uploads/{date:%Y/%m}/{slug}.svg"
        posts.append(post)
    return posts


def _site(post: dict) -> str:
    parts = urlsplit(post["link"])
    return f"{parts.scheme}://{parts.netloc}"


def _embedded(post: dict, wanted: set[str] | None) -> dict:
    site = _site(post)
    cover = post.get("jetpack_featured_media_url") or f"{site}/wp-content/uploads/2026/11/cover-{post['id']}.jpg"
    embedded = {
        "author": [{"id": 1, "name": "Ada Writer", "url": "", "description": "", "link": f"{site}/author/ada/",
                    "slug": "ada", "avatar_urls": {"96": "https://secure.gravatar.com/avatar/0?s=96"}}],
        "wp:featuredmedia": [{"id": post["featured_media"], "type": "attachment", "media_type": "image",
                              "mime_type": mimetypes.guess_type(cover)[0], "alt_text": "", "source_url": cover}],
        "wp:term": [
            [{**TERMS[i], "link": f"{site}/category/{TERMS[i]['slug']}/"} for i in post["categories"]],
            [{**TERMS[i], "link": f"{site}/tag/{TERMS[i]['slug']}/"} for i in post["tags"]],
        ],
    }  # fmt: skip
    return {name: value for name, value in embedded.items() if wanted is None or name in wanted}


def cover_svg(post: dict) -> str:
    """A post's cover: its title on its category's colours, 1200×630 as social cards are."""
    dark, light = COLOURS.get(post["categories"][0], COLOURS[3])
    category = TERMS.get(post["categories"][0], {}).get("name", "")
    title = html.unescape(post["title"]["rendered"])
    lines = textwrap.wrap(title, 26)[:4]
    text = "".join(
        f'<text x="80" y="{250 + index * 78}" font-size="64" font-weight="700">{html.escape(line)}</text>'
        for index, line in enumerate(lines)
    )
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="630" viewBox="0 0 1200 630">'
        f'<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="{dark}"/>'
        f'<stop offset="1" stop-color="{light}"/></linearGradient></defs>'
        '<rect width="1200" height="630" fill="url(#g)"/>'
        '<circle cx="1080" cy="120" r="220" fill="#ffffff" opacity=".08"/>'
        '<g fill="#ffffff" font-family="system-ui, sans-serif">'
        f'<text x="80" y="130" font-size="30" letter-spacing="4" opacity=".85">{html.escape(category.upper())}</text>'
        f"{text}</g></svg>"
    )


class WordPress(AiohttpStandIn):
    name = "wordpress"

    def __init__(
        self,
        posts: Sequence[dict] | None = None,
        *,
        demo: bool = False,
        credentials: tuple[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        super().__init__(host=host, port=port)
        self.demo = demo
        self.posts = list(posts if posts is not None else [] if demo else [make_post(n) for n in range(1, 26)])
        self.status: int | None = None
        self.delay = 0.0
        self.credentials = credentials
        self.calls = 0
        self.requests: list[dict] = []  # query of every request to the REST API, in order

    def start(self) -> "WordPress":
        super().start()
        if self.demo and not self.posts:
            self.posts = demo_posts(self.origin)  # the covers' URLs name the port taken
        return self

    @property
    def api_url(self) -> str:
        return f"{self.origin}/wp-json"

    def settings(self) -> dict[str, str]:
        found = {"WORDPRESS_API_URL": self.api_url}
        if self.credentials:
            found |= {"WORDPRESS_USERNAME": self.credentials[0], "WORDPRESS_APP_PASSWORD": self.credentials[1]}
        return found

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/wp-content/uploads/{path:.+}", self._cover)
        app.router.add_route("*", "/{path:.*}", self._answer)

    async def _cover(self, request: web.Request) -> web.Response:
        url = f"{self.origin}{request.path}"
        post = next((post for post in self.posts if post.get("jetpack_featured_media_url") == url), None)
        if post is None:
            raise web.HTTPNotFound()
        return web.Response(text=cover_svg(post), content_type="image/svg+xml")

    async def _answer(self, request: web.Request) -> web.Response:
        query = {name: request.query.getall(name)[-1] for name in request.query}
        self.calls += 1
        self.requests.append(query)
        self.record(Received(self.name, "request", f"{request.method} {request.path_qs}"))
        if self.delay:
            await asyncio.sleep(self.delay)
        if request.path.rstrip("/") != "/wp-json/wp/v2/posts" or request.method != "GET":
            return _send(404, {"code": "rest_no_route", "data": {"status": 404},
                               "message": "No route was found matching the URL and request method."})  # fmt: skip
        if self.status:
            return _send(self.status, {"code": "internal_server_error", "message": "down",
                                       "data": {"status": self.status}})  # fmt: skip
        if self.credentials and not self._authorized(request):
            return _send(401, {"code": "incorrect_password", "message": "The provided password is an invalid "
                               "application password.", "data": {"status": 401}})  # fmt: skip
        return _send(*self._posts(query))

    def _authorized(self, request: web.Request) -> bool:
        expected = base64.b64encode(":".join(self.credentials).encode()).decode()
        return request.headers.get("Authorization", "") == f"Basic {expected}"

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


def _send(status: int, body, headers: dict | None = None) -> web.Response:
    return web.json_response(body, status=status, headers={"Allow": "GET", **(headers or {})})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local WordPress with a dozen posts and their cover images.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8774)
    args = parser.parse_args(argv)
    WordPress(demo=True, host=args.host, port=args.port).serve_until_signalled()


if __name__ == "__main__":
    main()
