"""Every field the blog proxy serves is sanitized or validated, whatever WordPress sends."""

import json

import pytest

from standins import wordpress as wordpress_standin
from standins.wordpress import make_post
from tests.blog import conftest as blog_fixtures

# The blog tests' fixtures: a WordPress stand-in the blog reads from, and an empty cache around each test.
wordpress = blog_fixtures.wordpress
empty_cache = blog_fixtures.empty_cache

MARKUP = ("<", ">", "javascript:", "onerror", "onload", "alert")


@pytest.fixture
def embeds(monkeypatch):
    """Per-post overrides of what the WordPress stand-in embeds (author, featured media, terms)."""
    overrides: dict[int, dict] = {}
    stock = wordpress_standin._embedded

    def embedded(post, wanted):
        if post["id"] not in overrides:
            return stock(post, wanted)
        return {name: value for name, value in overrides[post["id"]].items() if wanted is None or name in wanted}

    monkeypatch.setattr(wordpress_standin, "_embedded", embedded)
    return overrides


def hostile_post(number: int, embeds: dict, *, image_url: str, slug: str = "") -> dict:
    post = make_post(number, category=66)
    if slug:
        post["slug"] = slug
    embeds[number] = {
        "author": [{"id": 1, "name": '<img src=x onerror="alert(1)">Eve <b>Writer</b>'}],
        "wp:featuredmedia": [{"id": 1, "source_url": image_url}],
        "wp:term": [[{"id": 66, "taxonomy": "category", "name": "<script>alert(2)</script>News",
                      "slug": '"><svg onload=alert(3)>'}]],
    }  # fmt: skip
    return post


def served(client, path) -> dict:
    response = client.get(path)
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def test_author_category_and_image_fields_of_a_list_carry_no_markup(client, wordpress, embeds):
    wordpress.posts = [
        hostile_post(1, embeds, image_url="javascript:alert(4)//https://blog.example.com/a.jpg"),
        hostile_post(2, embeds, image_url='https://blog.example.com/a.jpg" onerror="alert(5)'),
        hostile_post(3, embeds, image_url="https:\\\\evil.example/a.jpg"),
        hostile_post(4, embeds, image_url="https://blog.example.com/wp-content/uploads/cover.jpg"),
    ]

    posts = {post["id"]: post for post in served(client, "/api/posts")["posts"]}

    for post in posts.values():
        assert post["authorName"] == "Eve Writer"
        assert post["categories"] == [{"id": 66, "name": "News", "slug": None}]
        text = json.dumps({name: value for name, value in post.items() if name != "excerpt"})  # excerpt is HTML
        assert not any(marker in text for marker in MARKUP), text
    assert [posts[n]["featuredImageUrl"] for n in (1, 2, 3)] == [None, None, None]
    assert posts[4]["featuredImageUrl"] == "https://blog.example.com/wp-content/uploads/cover.jpg"


def test_a_post_slug_outside_the_slug_pattern_is_not_served(client, wordpress, embeds):
    wordpress.posts = [
        hostile_post(1, embeds, image_url="", slug="<svg onload=alert(1)>"),
        hostile_post(2, embeds, image_url="", slug="a/../../admin"),
        hostile_post(3, embeds, image_url="", slug="caf%c3%a9-opening"),
    ]

    posts = {post["id"]: post for post in served(client, "/api/posts")["posts"]}

    assert (posts[1]["slug"], posts[1]["detailUrl"]) == ("", None)
    assert (posts[2]["slug"], posts[2]["detailUrl"]) == ("", None)
    assert posts[3]["slug"] == "caf%c3%a9-opening"
    assert posts[3]["detailUrl"] == "https://www.example.com/api/posts/caf%C3%A9-opening"


def test_ids_and_dates_are_validated(client, wordpress, embeds):
    post = hostile_post(1, embeds, image_url="")
    post.update(date="<script>alert(1)</script>", modified="2026-11-01T10:00:00", categories=[66, "<b>7</b>"])
    wordpress.posts = [post]

    (served_post,) = served(client, "/api/posts")["posts"]

    assert served_post["date"] is None and served_post["modified"] == "2026-11-01T10:00:00"
    assert [category["id"] for category in served_post["categories"]] == [66]


def test_srcset_candidates_are_each_checked(client, wordpress):
    wordpress.posts.append(make_post(50, content=(
        '<img src="https://blog.example.com/a.png" srcset="javascript:alert(1) 1x">'
        '<img src="https://blog.example.com/b.png" srcset="https://blog.example.com/b.png 1x, javascript:alert(2) 2x">'
        '<img src="https://blog.example.com/c.png" srcset="data:image/svg+xml,&lt;svg onload=alert(3)&gt; 2x">'
        '<img src="https://blog.example.com/d.png" srcset="&#106;avascript:alert(4) 1x">'
        '<img src="https://blog.example.com/e.png" srcset="https://blog.example.com/e-300.png 300w, '
        'https://blog.example.com/e-1024.png 1024w" sizes="(max-width: 300px) 100vw, 300px">'
    )))  # fmt: skip

    content = served(client, "/api/posts/post-50")["content"]

    assert "alert" not in content and "javascript" not in content and "data:" not in content
    for name in "abcd":
        assert f'<img src="https://blog.example.com/{name}.png">' in content
    assert (
        '<img src="https://blog.example.com/e.png" srcset="https://blog.example.com/e-300.png 300w, '
        'https://blog.example.com/e-1024.png 1024w" sizes="(max-width: 300px) 100vw, 300px">'
    ) in content
