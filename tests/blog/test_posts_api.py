"""GET /api/posts and /api/posts/<slug> through the cache, against a local WordPress."""

import dataclasses
import json
import time

import pytest
from django.core.cache import cache

from blog import cache as posts_cache
from blog.posts import PostsQuery
from standins.wordpress import make_post
from tests.conftest import minute_with_time_left


def get(client, path, **headers):
    return client.get(path, headers=headers)


def body(response):
    return json.loads(response.content)


def test_a_page_of_posts_has_our_fields_and_pagination_in_body_and_headers(client, wordpress):
    response = get(client, "/api/posts?page=2&per_page=5")
    assert response.status_code == 200
    answer = body(response)
    assert (answer["page"], answer["perPage"], answer["total"], answer["totalPages"]) == (2, 5, 25, 5)
    assert (response["X-WP-Total"], response["X-WP-TotalPages"]) == ("25", "5")
    post = answer["posts"][0]
    assert set(post) == {"id", "slug", "title", "excerpt", "date", "modified", "authorName", "categories",
                         "featuredImageUrl", "detailUrl"}  # fmt: skip
    assert post["authorName"] == "Ada Writer"
    assert post["categories"] == [{"id": 3, "name": "Engineering", "slug": "engineering"}]
    assert post["featuredImageUrl"].endswith(f"/cover-{post['id']}.jpg")
    assert post["detailUrl"] == f"https://www.example.com/api/posts/{post['slug']}"
    assert "content" not in post


def test_filters_reach_wordpress_and_fields_narrow_the_answer(client, wordpress):
    response = get(client, "/api/posts?search=number%202&categories=3&orderby=title&order=asc&_fields=id,slug")
    assert response.status_code == 200
    assert all(set(post) == {"id", "slug"} for post in body(response)["posts"])
    sent = wordpress.requests[-1]
    assert (sent["search"], sent["categories"], sent["orderby"], sent["order"]) == ("number 2", "3", "title", "asc")
    assert sent["_embed"] == "author,wp:featuredmedia,wp:term"


@pytest.mark.parametrize(
    ("query", "field"),
    [("per_page=0", "per_page"), ("per_page=101", "per_page"), ("page=0", "page"), ("page=x", "page"),
     ("orderby=random", "orderby"), ("categories=3,x", "categories"), ("_fields=id,password", "_fields"),
     ("orderby=relevance", "orderby"), ("cache=maybe", "cache")],
)  # fmt: skip
def test_bad_parameters_are_refused_per_field(client, wordpress, query, field):
    response = get(client, f"/api/posts?{query}")
    assert response.status_code == 400
    assert field in body(response)["error"]["fields"]
    assert wordpress.calls == 0


def test_unknown_parameters_are_refused_by_name(client, wordpress):
    response = get(client, "/api/posts?page=1&status=draft&author=1")
    assert response.status_code == 400
    assert set(body(response)["error"]["fields"]) == {"status", "author"}
    response = get(client, "/api/posts/post-1?_embed=1")
    assert response.status_code == 400
    assert set(body(response)["error"]["fields"]) == {"_embed"}


def test_a_page_past_the_end_is_our_404_and_zero_posts_is_an_empty_page(client, wordpress):
    response = get(client, "/api/posts?page=4")
    assert response.status_code == 404
    assert body(response)["error"]["code"] == "page_out_of_range"
    wordpress.posts = []
    response = get(client, "/api/posts?page=3&cache=false")
    assert response.status_code == 200
    assert body(response) == {"posts": [], "page": 3, "perPage": 10, "total": 0, "totalPages": 0}


def test_miss_then_hit_then_bypass_refreshes(client, wordpress):
    first = get(client, "/api/posts?per_page=3")
    assert first["X-Cache"] == "miss"
    second = get(client, "/api/posts?per_page=3")
    assert second["X-Cache"] == "hit"
    assert second.content == first.content
    assert wordpress.calls == 1

    wordpress.posts.append(make_post(99, title="Fresh news"))
    bypass = get(client, "/api/posts?per_page=3&cache=false")
    assert bypass["X-Cache"] == "bypass"
    assert body(bypass)["posts"][0]["title"] == "Fresh news"
    after = get(client, "/api/posts?per_page=3")
    assert (after["X-Cache"], after.content) == ("hit", bypass.content)
    assert wordpress.calls == 2


def test_a_hit_reads_the_shared_entry_each_time_and_answers_as_a_miss_does(client, wordpress):
    """Hits are answered before DRF's handling, from Redis on every request: what another process stored
    since is what the next hit serves, with the headers the view gives."""
    miss = get(client, "/api/posts?page=2")
    hit = get(client, "/api/posts?page=2")
    assert [name for name in miss.headers if name not in ("X-Cache", "X-Request-ID")] == [
        name for name in hit.headers if name not in ("X-Cache", "X-Request-ID")
    ]
    assert "Allow" not in hit and hit["Content-Type"] == "application/json"

    key = posts_cache.entry_key(PostsQuery(page=2).cache_name, posts_cache.current_generation())
    rewritten = dataclasses.replace(cache.get(key), body=b'{"posts":[]}', etag='"rewritten"')
    cache.set(key, rewritten)  # another process's ?cache=false
    again = get(client, "/api/posts?page=2")
    assert (again["X-Cache"], again.content, again["ETag"]) == ("hit", b'{"posts":[]}', '"rewritten"')
    assert wordpress.calls == 1


def test_an_expired_entry_is_fetched_again(client, wordpress, settings):
    settings.BLOG_CACHE_TTL_SECONDS = 0
    assert get(client, "/api/posts")["X-Cache"] == "miss"
    assert get(client, "/api/posts")["X-Cache"] == "miss"
    assert wordpress.calls == 2


@pytest.mark.parametrize("failure", ["down", "slow"])
def test_wordpress_failing_serves_the_last_good_copy_marked_stale(client, wordpress, settings, failure):
    settings.BLOG_CACHE_TTL_SECONDS = 0  # every request goes to WordPress
    good = get(client, "/api/posts")
    if failure == "down":
        wordpress.status = 502
    else:
        wordpress.delay = 1.5  # past WORDPRESS_TIMEOUT_SECONDS (1 s)
    stale = get(client, "/api/posts")
    assert stale.status_code == 200
    assert stale["X-Cache"] == "stale"
    assert stale["Warning"].startswith("110")
    assert stale.content == good.content


def test_past_the_stale_window_or_with_no_copy_it_is_a_503_with_a_code(client, wordpress, settings):
    wordpress.status = 500
    response = get(client, "/api/posts")
    assert response.status_code == 503
    assert body(response)["error"]["code"] == "blog_unavailable"
    assert response["X-Cache"] == "miss"

    wordpress.status = None
    settings.BLOG_CACHE_TTL_SECONDS, settings.BLOG_STALE_SECONDS = 0, 1
    get(client, "/api/posts?page=2")
    time.sleep(1.1)
    wordpress.status = 500
    assert get(client, "/api/posts?page=2").status_code == 503


def test_a_failing_wordpress_is_asked_again_only_after_a_pause(client, wordpress):
    wordpress.status = 503
    for _ in range(5):
        assert get(client, "/api/posts").status_code == 503
    assert wordpress.calls == 1


def test_with_the_cache_down_wordpress_answers_directly(client, wordpress, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0"}}  # fmt: skip
    for _ in range(2):
        response = get(client, "/api/posts")
        assert response.status_code == 200
        assert response["X-Cache"] == "miss"
        assert body(response)["total"] == 25
    assert wordpress.calls == 2


def test_refusals_say_they_did_not_come_from_the_cache(client, wordpress):
    response = get(client, "/api/posts?per_page=0")
    assert (response.status_code, response["X-Cache"]) == (400, "miss")


def test_not_configured_is_a_503_with_its_own_code(client, settings):
    settings.WORDPRESS_API_URL = ""
    response = get(client, "/api/posts")
    assert response.status_code == 503
    assert body(response)["error"]["code"] == "blog_not_configured"


def test_etag_answers_304_to_a_conditional_request(client, wordpress):
    first = get(client, "/api/posts")
    etag = first["ETag"]
    again = get(client, "/api/posts", **{"If-None-Match": etag})
    assert again.status_code == 304
    assert again["ETag"] == etag and again["X-Cache"] == "hit"
    assert again.content == b""
    assert get(client, "/api/posts", **{"If-None-Match": '"other"'}).status_code == 200


def test_one_post_by_slug_with_sanitized_content(client, wordpress):
    wordpress.posts.append(make_post(
        50, title="<b>Tips</b> &amp; tricks<script>alert(1)</script>",
        content='<p onclick="steal()">Hello <a href="javascript:alert(1)">link</a></p><script>alert(2)</script>'
                '<img src="https://blog.example.com/a.png" onerror="steal()"><iframe src="https://evil.example"></iframe>'
                '<figure class="wp-block-image"><img src="https://blog.example.com/b.png" alt="chart"></figure>',
    ))  # fmt: skip
    response = get(client, "/api/posts/post-50")
    assert response.status_code == 200
    post = body(response)
    assert post["title"] == "Tips &amp; tricks"
    content = post["content"]
    for dangerous in ("<script", "onclick", "onerror", "javascript:", "<iframe", "steal"):
        assert dangerous not in content
    assert '<figure class="wp-block-image"><img src="https://blog.example.com/b.png" alt="chart"></figure>' in content
    assert "<p>Hello <a" in content


def test_an_unknown_slug_is_a_404_and_bad_slugs_are_refused(client, wordpress):
    response = get(client, "/api/posts/no-such-post")
    assert response.status_code == 404
    assert body(response)["error"]["code"] == "post_not_found"
    assert get(client, "/api/posts/no-such-post")["X-Cache"] == "hit"
    assert get(client, "/api/posts/" + "a" * 201).status_code == 400


def test_a_post_called_cache_is_still_reachable(client, wordpress):
    post = make_post(60)
    post["slug"] = "cache"
    wordpress.posts.append(post)
    response = get(client, "/api/posts/cache")
    assert response.status_code == 200
    assert body(response)["id"] == 60


def test_reads_that_reach_wordpress_are_rate_limited_and_hits_are_not(client, wordpress, monkeypatch):
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "blog", "2/min")
    minute_with_time_left()
    assert get(client, "/api/posts?page=1").status_code == 200
    assert get(client, "/api/posts?page=2").status_code == 200
    refused = get(client, "/api/posts?page=3")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert get(client, "/api/posts/post-1").status_code == 429
    assert all(get(client, "/api/posts?page=1")["X-Cache"] == "hit" for _ in range(10))
    assert wordpress.calls == 2


def test_refreshing_has_its_own_lower_rate(client, wordpress, settings):
    from rest_framework.throttling import SimpleRateThrottle

    SimpleRateThrottle.THROTTLE_RATES["blog_refresh"] = "2/min"
    minute_with_time_left()
    try:
        assert get(client, "/api/posts?cache=false").status_code == 200
        assert get(client, "/api/posts?cache=false").status_code == 200
        assert get(client, "/api/posts?cache=false").status_code == 429
        assert get(client, "/api/posts").status_code == 200
    finally:
        SimpleRateThrottle.THROTTLE_RATES["blog_refresh"] = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"][
            "blog_refresh"
        ]
